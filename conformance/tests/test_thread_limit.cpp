// Under a thread limit (RLIMIT_NPROC: a new thread beyond it refused with EAGAIN) the threaded paths
// give the same bytes as one thread, with what the refused threads would have done done by the threads
// that started: the reference's parallel::for_block_ranges (a fast path asked for 4 threads) and the
// audit's chunk pool. Before, no thread allowed threw std::system_error out of the call, and one
// allowed ended the process (std::terminate: a joinable thread destroyed while the error unwound).
#include <doctest/doctest.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "lowbit/audit.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/formats.hpp"

using namespace lowbit;
using blockwise::fp8_perblock_quantize;
using blockwise::Quantized;

namespace {

// In a child process: at most `allowed` more threads from here on. The child becomes a user id of its
// own (no other process counts against its RLIMIT_NPROC) with a limit of itself plus `allowed`.
// Returns what stopped it, or "" when the limit holds.
std::string limit_threads(int allowed) {
  const auto uid = static_cast<uid_t>(50000 + ::getpid() % 10000);
  if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) return "could not take a user id of its own";
  const rlim_t limit = static_cast<rlim_t>(1 + allowed);
  const rlimit r{limit, limit};
  if (::setrlimit(RLIMIT_NPROC, &r) != 0) return "setrlimit(RLIMIT_NPROC) failed";
  return "";
}

// Runs check() in a child allowed `allowed` more threads; the child's exit 0 when check() held.
void in_child_with_threads(int allowed, const std::function<bool()>& check) {
  if (::geteuid() != 0) {
    MESSAGE("not run: only root can give the child a user id of its own, so that its thread limit is exact");
    return;
  }
  CAPTURE(allowed);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // doctest's handlers would catch an abort or an exception and go on with the suite in the child:
    // let either end the child instead
    for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, SIG_DFL);
    const std::string why = limit_threads(allowed);
    if (!why.empty()) {
      std::fprintf(stderr, "test_thread_limit: %s\n", why.c_str());
      ::_exit(3);
    }
    try {
      ::_exit(check() ? 0 : 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "test_thread_limit: %s\n", e.what());
      ::_exit(2);
    }
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO("the child ", WIFSIGNALED(status) ? "died of signal " + std::to_string(WTERMSIG(status)) + " (std::terminate: 6)"
                                          : "exited " + std::to_string(WEXITSTATUS(status)) +
                                                " (1: other bytes, 2: an exception, 3: no limit)");
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

std::vector<float> data(std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::sin(0.001f * static_cast<float>(i)) * static_cast<float>(1 + i % 7);
  return x;
}

}  // namespace

TEST_CASE("a fast path asked for 4 threads where 0 or 1 more can start: the bytes of 1 thread") {
  const std::vector<float> x = data(1 << 16);
  const Quantized one = fp8_perblock_quantize(x, 128, 1);
  for (int allowed : {0, 1}) in_child_with_threads(allowed, [&] {
    const Quantized four = fp8_perblock_quantize(x, 128, 4);
    return four.codes == one.codes && four.scale.size() == one.scale.size() &&
           std::equal(four.scale.begin(), four.scale.end(), one.scale.begin(),
                      [](float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); });
  });
}

TEST_CASE("the audit asked for 4 threads where 0 or 1 more can start: the measures of 1 thread") {
  const std::vector<float> x = data(1 << 20);  // 4 of the audit's chunks of 2^18
  const FormatSpec* f = find_format("bnb.blockwise8.dynamic");
  REQUIRE(f);
  const audit::Metrics one = audit::audit(*f, x, 256, 1);
  for (int allowed : {0, 1}) in_child_with_threads(allowed, [&] {
    const audit::Metrics four = audit::audit(*f, x, 256, 4);
    return four.n == one.n && four.mean_abs == one.mean_abs && four.rel_l2 == one.rel_l2 && four.max_abs == one.max_abs &&
           four.flushed == one.flushed && four.worst_block == one.worst_block;
  });
}
