// Bug class: subnormal inputs read as zeros of their sign (denormals-are-zero). In a block of an
// ordinary absmax a subnormal x and a zero get the same cell, so only blocks made of subnormals show
// it (tiny-blocks): their absmax becomes 0, and with it every code and the scale.
#include "mutant_bnb_cpu.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "flush-subnormal-inputs";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  BnbCpuPieces p;
  p.load = [](float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; };
  requantize_bnb_cpu(done, params, p);
}
}  // namespace mutant
