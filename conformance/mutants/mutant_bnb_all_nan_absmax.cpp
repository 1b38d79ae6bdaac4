// Bug class: the absmax started from the block's first |x| and folded with fmaxf, where bitsandbytes
// starts from 0: the same wherever a block holds a number, but a block made only of NaNs gets a NaN
// absmax (stored as its scale, and every y NaN: code 0) where bitsandbytes stores 0. Only an all-NaN
// block shows it (special-blocks).
#include "mutant_bnb_cpu.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "absmax-from-first-element";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  BnbCpuPieces p;
  p.absmax = [](std::span<const float> b) {
    float a = std::fabs(b[0]);
    for (float x : b.subspan(1)) a = std::fmax(a, std::fabs(x));
    return a;
  };
  requantize_bnb_cpu(done, params, p);
}
}  // namespace mutant
