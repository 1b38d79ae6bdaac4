// Bug class: a division by the absmax (y = x / absmax) where bitsandbytes' CPU back end multiplies by
// its reciprocal (x * (1 / absmax)). The codes differ only where the two land in different cells of
// the lookup table, so the codebook's midpoints (edges, scaled-edges) never show it: the table's own
// cell boundaries under non-power-of-two absmaxes do (table-edges), and subnormal absmaxes whose
// reciprocal overflows (tiny-blocks).
#include "mutant_bnb_cpu.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "division-by-absmax";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  BnbCpuPieces p;
  p.normalize = [](float x, float absmax) { return x / absmax; };
  requantize_bnb_cpu(done, params, p);
}
}  // namespace mutant
