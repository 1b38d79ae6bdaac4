#include "progress.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>

namespace lowbit::cli {

Progress::Progress(std::string label, bool quiet)
    : label_(std::move(label)), quiet_(quiet), terminal_(::isatty(STDERR_FILENO) == 1) {}

void Progress::update(std::uint64_t done, std::uint64_t total) {
  if (quiet_ || total == 0) return;
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double fraction = static_cast<double>(done) / static_cast<double>(total);
  if (terminal_) {
    if (done != total && now - last_draw_ < std::chrono::milliseconds(200)) return;
    last_draw_ = now;
    fmt::print(stderr, "\r{}: {:5.1f}% ({} of {} inputs, {:.1f} s)", label_, 100 * fraction, done, total, seconds);
  } else {
    const int tenth = static_cast<int>(fraction * 10);
    if (tenth == last_tenth_) return;
    last_tenth_ = tenth;
    fmt::print(stderr, "{}: {:3d}% ({:.1f} s)\n", label_, tenth * 10, seconds);
  }
  std::fflush(stderr);
}

void Progress::finish() {
  if (!quiet_ && terminal_) fmt::print(stderr, "\n");
}

}  // namespace lowbit::cli
