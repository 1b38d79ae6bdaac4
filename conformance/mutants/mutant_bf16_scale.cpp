// Bug class: the block scale rounded to bfloat16 (a kernel that keeps its scales in the model's
// dtype, or computes them in bf16 arithmetic): scale = bf16(max(amax, 1e-12) / 448), codes and
// dequantized values computed from that scale.
#include <cmath>

#include "lowbit/bf16_round.hpp"
#include "lowbit/float_bits.hpp"
#include "mutant_plugin.hpp"
#include "mutant_torchao_fp8.hpp"

namespace mutant {
const char* const kFormat = "torchao.fp8";
const char* const kBug = "scale-rounded-to-bf16";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  requantize(done, params, [](std::span<const float> block) {
    float amax = 0.0f;
    for (float v : block) {
      // torch.amax: a NaN propagates as the canonical 0x7FC00000 (docs/formats/torchao-fp8.md; not this mutant's bug)
      if (std::isnan(v)) return lowbit::float_from_bits(0x7FC00000u);
      amax = std::max(amax, std::fabs(v));
    }
    const float scale = torchao_scale(amax);
    return lowbit::float_from_bits(std::uint32_t{lowbit::bf16_round_nearest_even(scale)} << 16);
  });
}
}  // namespace mutant
