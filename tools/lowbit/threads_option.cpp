#include "threads_option.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include "number_option.hpp"

namespace lowbit::cli {

int default_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

int max_threads() { return std::max(8, 4 * default_threads()); }

CLI::Option* add_threads_option(CLI::App& app, int& threads) {
  threads = default_threads();
  return add_whole_option(app, "--threads", threads, 1, max_threads(),
                          "Worker threads (results are identical for any count)");
}

CLI::Option* add_case_threads_option(CLI::App& app, int& threads) {
  CLI::Option* option = add_threads_option(app, threads);
  threads = std::min(default_threads(), 8);
  option->description("Threads of the reference's fast paths on each case of 2^16 elements or more (smaller cases run on one), 1 to " +
                      std::to_string(max_threads()) + "; the outputs and reports are identical for any count");
  return option->default_str(std::to_string(threads));
}

}  // namespace lowbit::cli
