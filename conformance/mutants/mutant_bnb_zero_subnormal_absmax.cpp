// Bug class: a subnormal absmax taken as zero (a kernel under flush-to-zero, or a test absmax < FLT_MIN
// for an empty block): the block's codes become 0 and its scale 0, where bitsandbytes quantizes it
// (its reciprocal may overflow to infinity: then every x * inf is clamped to an end of the table).
// Only blocks whose absmax is subnormal show it (tiny-blocks).
#include "mutant_bnb_cpu.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "subnormal-absmax-zeroed";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  BnbCpuPieces p;
  const auto absmax = p.absmax;
  p.absmax = [absmax](std::span<const float> b) {
    const float a = absmax(b);
    return std::fpclassify(a) == FP_SUBNORMAL ? 0.0f : a;
  };
  requantize_bnb_cpu(done, params, p);
}
}  // namespace mutant
