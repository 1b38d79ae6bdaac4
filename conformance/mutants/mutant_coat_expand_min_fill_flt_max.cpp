// Bug class: the block-level minimum of COAT's expansion with FLT_MAX in warp 0's idle lanes 4-31,
// where the kernel puts 1e9 there and so caps every group minimum at 1e9 (docs/formats/coat-optimizer.md
// "Tails, the 1e9 cap"). Only moments of 1e9 and more show it: gradients of 1e10 and more (first
// moment) or 1e6 and more (second).
#include <array>
#include <cfloat>
#include <cmath>

#include "mutant_coat_expand.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.optim.expand.e4m3";
const char* const kBug = "min-fill-flt-max";

namespace {
// One warp's minimum as the kernel shuffles it: lane l takes lane l + offset's value when that is > 0.
float warp_min(std::array<float, 32> lane) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const std::array<float, 32> was = lane;
    for (int l = 0; l < 32; ++l) {
      const float received = was[l + offset < 32 ? l + offset : l];
      if (received > 0.0f) lane[l] = std::fmin(was[l], received);
    }
  }
  return lane[0];
}
}  // namespace

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  requantize_coat_expand(done, params, reference_k_and_centre, [](std::span<const float> values) {
    lowbit::coat::GroupStats st = lowbit::coat::expand_group_stats(values);  // the maximum is the kernel's
    std::array<float, 32> top;
    top.fill(FLT_MAX);  // the bug: 1e9 in the kernel
    for (std::size_t w = 0; w < 4; ++w) {
      std::array<float, 32> lane;
      for (std::size_t l = 0; l < 32; ++l) {
        const std::size_t i = 32 * w + l;
        lane[l] = i < values.size() ? std::fabs(values[i]) : FLT_MAX;
      }
      top[w] = warp_min(lane);
    }
    st.min = warp_min(top);
    return st;
  });
}
}  // namespace mutant
