// Bug class: a NaN dequantized value written as +NaN (0x7FC00000, std::numeric_limits' quiet NaN)
// where q[code] * absmax of x86 gives its default NaN, 0xFFC00000. The product is NaN only for a
// zero entry times an infinite absmax: with the unsigned dynamic map (its q[0] is 0, the code of a
// NaN element), in a block holding an Inf. The signed maps' code 0 is -1: only verify's run with the
// unsigned map (bitsandbytes' optimizers' second moments) shows it.
#include <limits>

#include "mutant_bnb_cpu.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "dequant-nan-positive";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  BnbCpuPieces p;
  p.dequant = [](float q, float absmax) {
    const float d = q * absmax;
    return std::isnan(d) ? std::numeric_limits<float>::quiet_NaN() : d;
  };
  requantize_bnb_cpu(done, params, p);
}
}  // namespace mutant
