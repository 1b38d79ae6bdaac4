#pragma once
// A subcommand registers its options on the parser and returns what to run once parsing succeeded.
#include <CLI/CLI.hpp>
#include <functional>

namespace lowbit::cli {

struct Subcommand {
  CLI::App* app;
  std::function<int()> run;  // returns an ExitCode
};

Subcommand add_audit_command(CLI::App& parent);
Subcommand add_compare_command(CLI::App& parent);
Subcommand add_conform_command(CLI::App& parent);
Subcommand add_golden_command(CLI::App& parent);
Subcommand add_inspect_command(CLI::App& parent);
Subcommand add_sweep_command(CLI::App& parent);
Subcommand add_study_command(CLI::App& parent);
Subcommand add_sweep_fp8_command(CLI::App& sweep);
Subcommand add_sweep_codebook_command(CLI::App& sweep);
Subcommand add_verify_command(CLI::App& parent);

}  // namespace lowbit::cli
