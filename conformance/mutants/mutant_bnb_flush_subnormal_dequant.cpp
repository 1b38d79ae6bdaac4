// Bug class: subnormal dequantized values flushed to zero (q[code] * absmax under flush-to-zero).
// A dequantized value is subnormal only in a block whose absmax is tiny (tiny-blocks); every other
// input of the battery has blocks of absmax 0.0037 or more.
#include "mutant_bnb_cpu.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "flush-subnormal-dequant";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  BnbCpuPieces p;
  p.dequant = [](float q, float absmax) {
    const float d = q * absmax;
    return std::fpclassify(d) == FP_SUBNORMAL ? std::copysign(0.0f, d) : d;
  };
  requantize_bnb_cpu(done, params, p);
}
}  // namespace mutant
