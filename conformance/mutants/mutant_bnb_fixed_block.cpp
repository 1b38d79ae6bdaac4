// Bug class: blocks of 4096 whatever block_size says (a kernel written for quantize_blockwise's
// default): each stored scale is the absmax of the 4096 elements around it. Only the battery's runs at
// other block sizes show it (block_size 64 and 256, bitsandbytes' smallest and its optimizers').
#include "mutant_bnb_cpu.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "block-size-fixed-4096";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  BnbCpuPieces p;
  p.block = [](std::size_t) { return std::size_t{4096}; };
  requantize_bnb_cpu(done, params, p);
}
}  // namespace mutant
