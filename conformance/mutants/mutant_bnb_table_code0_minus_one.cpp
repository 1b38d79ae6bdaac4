// Bug class: the CPU lookup table built after forcing the map's first entry to -1, as bitsandbytes'
// CPU quantize_cpu did up to 0.49.2 (csrc/cpu_ops.cpp: "code[0] = -1.0f;" before its search), kept
// in front of 0.50's table. The signed maps start at -1 (linear) or -0.99297 (dynamic: a few cells
// near -1); the unsigned linear map starts at 0, and its first midpoint moves from 1/510 to about
// -0.498: small values get code 1 instead of 0. The dequant reads the case's qmap. Only the battery's
// runs with map=linear_unsigned show it on bnb.blockwise8.linear.
#include "mutant_bnb_cpu.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.linear";
const char* const kBug = "table-code0-minus-one";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  BnbCpuPieces p;
  p.table_map = [](std::vector<float> q) {
    q.front() = -1.0f;
    return q;
  };
  requantize_bnb_cpu(done, params, p);
}
}  // namespace mutant
