// Bug class: an absmax that skips NaN where the format lets it propagate (fmaxf, or a max reduction
// that drops NaN operands, in a kernel for torchao's torch.amax): a block holding a NaN gets the
// finite absmax of its other elements as its scale instead of NaN, so its other codes and dequantized
// values come out finite.
#include <cmath>

#include "mutant_plugin.hpp"
#include "mutant_torchao_fp8.hpp"

namespace mutant {
const char* const kFormat = "torchao.fp8";
const char* const kBug = "absmax-ignores-nan";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  requantize(done, params, [](std::span<const float> block) {
    float amax = 0.0f;
    for (float v : block) amax = std::fmax(amax, std::fabs(v));  // fmax returns the other operand of a NaN
    return torchao_scale(amax);
  });
}
}  // namespace mutant
