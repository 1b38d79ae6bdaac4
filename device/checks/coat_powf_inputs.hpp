#pragma once
// The (x, y) that COAT's optimizer kernels give powf, as the GPU checks draw them: beta^step (the
// bias corrections), z^k (the dynamic range expansion) and z^(1/k) (its inverse). Shared by the GPU
// check (approx_checks.cpp) and the CPU test of the measured table (test_rcp_table.cpp), which must
// draw the very same inputs to reproduce the GPU run's counts.
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace lowbit::gpu {

inline void coat_powf_inputs(std::vector<float>& x, std::vector<float>& y) {
  std::mt19937_64 rng(20261201);
  std::uniform_real_distribution<float> beta(0.5f, 1.0f);
  std::uniform_int_distribution<int> step(1, 1 << 20);
  std::uniform_real_distribution<double> log2_z(-40.0, 40.0);
  std::uniform_int_distribution<int> k_times_16(16, 64 * 16);
  constexpr std::size_t kEach = std::size_t{1} << 23;
  x.reserve(x.size() + 3 * kEach);
  y.reserve(y.size() + 3 * kEach);
  for (std::size_t i = 0; i < kEach; ++i) {
    x.push_back(beta(rng));
    y.push_back(static_cast<float>(step(rng)));
    const float z = static_cast<float>(std::exp2(log2_z(rng)));
    const float k = static_cast<float>(k_times_16(rng)) / 16.0f;
    x.push_back(z);
    y.push_back(k);
    x.push_back(z);
    y.push_back(1.0f / k);
  }
}

}  // namespace lowbit::gpu
