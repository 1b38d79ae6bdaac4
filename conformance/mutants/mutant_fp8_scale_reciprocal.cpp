// Bug class: torchao.fp8's block scale as amax * (1 / 448) instead of amax / 448 (a kernel that
// multiplies by the rounded reciprocal of the E4M3 maximum): for some absmaxes the scale differs in its
// last bit, and the block's codes and dequantized values follow from that scale. Everything else is
// torchao's: the clipped absmax with torch's NaN, x / scale, the cast and the dequantization.
#include "lowbit/blockwise.hpp"
#include "lowbit/fp8.hpp"
#include "mutant_plugin.hpp"
#include "mutant_torchao_fp8.hpp"

namespace mutant {
const char* const kFormat = "torchao.fp8";
const char* const kBug = "scale-reciprocal-of-448";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  requantize(done, params, [](std::span<const float> block) {
    const float e4m3_max = lowbit::fp8::decode<lowbit::fp8::E4M3FN>(lowbit::fp8::E4M3FN::max_finite);  // 448
    return lowbit::blockwise::torchao_fp8_clipped_amax(block) * (1.0f / e4m3_max);
  });
}
}  // namespace mutant
