#pragma once
// The one way the arithmetic library spreads work over threads: consecutive ranges of blocks, one
// range per thread. A block is computed by one thread from its own inputs into its own outputs, so
// the bytes cannot depend on the thread count. Used by the arithmetic's fast paths and the engine's
// input generators.
#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace lowbit::parallel {

// Calls body(first_block, end_block) for at most `threads` ranges covering [0, blocks); the calling
// thread takes the first range. body must not throw (check inputs before).
template <class Body>
void for_block_ranges(std::size_t blocks, int threads, const Body& body) {
  if (threads < 1) throw std::invalid_argument("thread count must be at least 1 (got " + std::to_string(threads) + ")");
  const std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(threads), blocks);
  if (t <= 1) {
    body(std::size_t{0}, blocks);
    return;
  }
  auto range_start = [&](std::size_t k) { return blocks / t * k + std::min(k, blocks % t); };
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  // A thread the system refuses (a process or cgroup thread limit: std::system_error) leaves its range
  // and those after it to the calling thread: the same bytes, later, instead of std::terminate from
  // a vector of joinable threads destroyed while the error unwinds.
  std::size_t started = 1;
  try {
    for (; started < t; ++started)
      pool.emplace_back([&, started] { body(range_start(started), range_start(started + 1)); });
  } catch (const std::system_error&) {
  }
  try {
    body(range_start(0), range_start(1));
    for (std::size_t k = started; k < t; ++k) body(range_start(k), range_start(k + 1));
  } catch (...) {
    for (std::thread& th : pool) th.join();
    throw;
  }
  for (std::thread& th : pool) th.join();
}

}  // namespace lowbit::parallel
