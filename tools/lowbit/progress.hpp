#pragma once
// Progress of long runs on stderr: a line rewritten in place on a terminal, a line per tenth of
// the work otherwise (so CI logs stay short). Silent when quiet.
#include <chrono>
#include <cstdint>
#include <string>

namespace lowbit::cli {

class Progress {
 public:
  Progress(std::string label, bool quiet);
  void update(std::uint64_t done, std::uint64_t total);
  void finish();

 private:
  std::string label_;
  bool quiet_;
  bool terminal_;
  int last_tenth_ = -1;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace lowbit::cli
