#include "threads_option.hpp"

#include <algorithm>
#include <string>
#include <thread>

namespace lowbit::cli {

int default_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

int max_threads() { return std::max(8, 4 * default_threads()); }

CLI::Option* add_threads_option(CLI::App& app, int& threads) {
  threads = default_threads();
  return app
      .add_option("--threads", threads,
                  "Worker threads, 1 to " + std::to_string(max_threads()) + " (results are identical for any count)")
      ->check(CLI::Range(1, max_threads()))
      ->capture_default_str();
}

}  // namespace lowbit::cli
