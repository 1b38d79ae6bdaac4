#pragma once
// The --threads option every parallel command takes: a whole number from 1 to a bound set by the
// hardware (beyond a few threads per core nothing runs faster, and tens of thousands of threads
// exhaust the OpenMP runtime instead of failing cleanly). The default is one thread per core.
#include <CLI/CLI.hpp>

namespace lowbit::cli {

int default_threads();
int max_threads();  // 4 per core, at least 8
CLI::Option* add_threads_option(CLI::App& app, int& threads);
// conform, verify and golden generate: the threads the reference's fast paths use on one case (a
// case under 2^16 elements runs on one, formats::worth_threads). Default one per core, at most 8:
// beyond that a case's memory traffic, not its arithmetic, bounds it.
CLI::Option* add_case_threads_option(CLI::App& app, int& threads);

}  // namespace lowbit::cli
