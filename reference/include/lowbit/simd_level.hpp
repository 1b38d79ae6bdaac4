#pragma once
// Which instruction set the fast paths of the arithmetic library use (fp8_cast.hpp, blockwise.hpp).
// Chosen once per process from the CPU: AVX2 with FMA3 where present, else SSE2. Every level gives
// the same bytes (conformance/tests/test_fast_paths.cpp runs each one the CPU has); tests and benchmarks
// may pin one.
#include <string_view>

namespace lowbit::simd {

enum class Level { Sse2, Avx2 };

bool available(Level level);
Level active();
// Throws std::invalid_argument where the CPU (or the build) lacks the level. Not thread-safe
// against fast paths running at the same time.
void set_level(Level level);
std::string_view level_name(Level level);  // "sse2", "avx2+fma"

}  // namespace lowbit::simd
