// Bug class: the lookup table's grid computed in double, v_t = -1 + 2 t / 65535, where bitsandbytes
// computes it in float: a cell whose float grid value and exact one lie either side of a midpoint
// takes the other code. No such cell in the signed dynamic map; the unsigned one (bitsandbytes'
// optimizers' second moments) has them: only the battery's runs with map=dynamic_unsigned show it.
#include "mutant_bnb_cpu.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "table-grid-in-double";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  BnbCpuPieces p;
  p.below = [](float midpoint, std::uint32_t t) { return midpoint < -1.0 + (2.0 * t) / 65535.0; };
  requantize_bnb_cpu(done, params, p);
}
}  // namespace mutant
