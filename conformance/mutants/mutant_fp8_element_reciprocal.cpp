// Bug class: torchao.fp8's codes from x * (1 / scale) instead of x / scale (a kernel that computes the
// block's reciprocal once and multiplies): under a scale that is not a power of two the two round
// differently near the E4M3 cast's decision thresholds. NaN handling is kept right: where x or the
// scale is NaN the reference's own division decides the NaN's bits, so the only bug is the arithmetic
// (a multiply whose operands the compiler may swap would otherwise pick the other NaN's sign).
#include <cmath>

#include "lowbit/blockwise.hpp"
#include "lowbit/fp8.hpp"
#include "mutant_plugin.hpp"
#include "mutant_torchao_fp8.hpp"

namespace mutant {
const char* const kFormat = "torchao.fp8";
const char* const kBug = "element-reciprocal-instead-of-division";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  const float e4m3_max = lowbit::fp8::decode<lowbit::fp8::E4M3FN>(lowbit::fp8::E4M3FN::max_finite);  // 448
  requantize(
      done, params,
      [e4m3_max](std::span<const float> block) { return lowbit::blockwise::torchao_fp8_clipped_amax(block) / e4m3_max; },
      [](float x, float s) { return std::isnan(x) || std::isnan(s) ? x / s : x * (1.0f / s); });
}
}  // namespace mutant
