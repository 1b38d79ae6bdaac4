#include "coat_optimizer_edges.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "lowbit/coat_optimizer.hpp"
#include "lowbit/generators.hpp"

namespace lowbit {

std::vector<float> coat_optimizer_edges() {
  constexpr std::size_t g = coat::kGroup;
  // ordinary magnitudes 0.05 .. about 4, either sign: none near the small values placed below
  std::mt19937_64 rng(2026);
  std::vector<float> x(kCoatEdgeGroups * g + kCoatEdgeTail);
  for (float& v : x) {
    const double z = standard_normal(rng);
    v = static_cast<float>(z < 0 ? z - 0.05 : z + 0.05);
  }
  const auto group = [&](std::size_t k) { return x.begin() + static_cast<std::ptrdiff_t>(k * g); };
  // 0: a zero at lane 1 hides the 16 odd lanes from lane 0; the group's smallest magnitude at lane 3
  group(0)[1] = 0.0f;
  group(0)[3] = 1e-4f;
  // 1: zeros at lanes 5, 13 and 29 (lane 5 hides 13, 21, 29) and at the first lanes of warps 1 and 3 (a
  // warp of result 0, skipped at block level); the smallest magnitudes at lanes 21 and 100, both hidden
  for (std::size_t lane : {5u, 13u, 29u, 32u, 96u}) group(1)[lane] = 0.0f;
  group(1)[21] = 1e-4f;
  group(1)[100] = -2e-4f;
  // 2: all zeros; 3: one value everywhere; 4: one value at lane 0, zeros elsewhere: R = 1, k = +inf
  std::fill(group(2), group(3), 0.0f);
  std::fill(group(3), group(4), 3.0f);
  std::fill(group(4), group(6), 0.0f);
  group(4)[0] = 1e-2f;
  // 5: the same at lane 5: lane 0's own zero makes the minimum 0
  group(5)[5] = 1e-2f;
  // 6: gradients of 2e10 .. 4e10: both moments above the 1e9 the block-level minimum's idle lanes hold
  for (std::size_t lane = 0; lane < g; ++lane)
    group(6)[static_cast<std::ptrdiff_t>(lane)] = (lane % 2 ? -1.0f : 1.0f) * (2e10f + 1.5e8f * static_cast<float>(lane));
  // 7, 8: the k boundaries, the first moment's and the second's: [small, large x 127]
  std::fill(group(7), group(8), kCoatEdgeRatioLarge);
  group(7)[0] = kCoatEdgeRatioSmall;
  std::fill(group(8), group(9), kCoatEdgeSquareRatioLarge);
  group(8)[0] = kCoatEdgeSquareRatioSmall;
  return x;
}

}  // namespace lowbit
