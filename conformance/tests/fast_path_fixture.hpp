#pragma once
// What the fast-path suites (test_fast_paths, test_fast_steps) share: the thread counts they try,
// the instruction sets this CPU has, pinning one for a test, and a float's bits as text.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "lowbit/simd_level.hpp"

namespace lowbit::test {

constexpr int kThreadCounts[] = {1, 2, 3, 7};

inline std::vector<simd::Level> levels() {
  std::vector<simd::Level> out;
  for (simd::Level l : {simd::Level::Sse2, simd::Level::Avx2})
    if (simd::available(l)) out.push_back(l);
  return out;
}

// Restores the process's level when a test is done with pinning one.
struct PinnedLevel {
  simd::Level saved = simd::active();
  explicit PinnedLevel(simd::Level l) { simd::set_level(l); }
  ~PinnedLevel() { simd::set_level(saved); }
};

inline std::string bits(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  char text[16];
  std::snprintf(text, sizeof text, "0x%08X", u);
  return text;
}

}  // namespace lowbit::test
