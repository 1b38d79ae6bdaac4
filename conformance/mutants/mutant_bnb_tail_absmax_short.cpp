// Bug class: the absmax of a partial last block taken over one element too few (a loop bound of the
// tail's length minus one). A tail whose largest value is its last shows it (special-blocks); the
// battery's other tails (special) have their largest value earlier.
#include "mutant_bnb_cpu.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "tail-absmax-misses-last";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  BnbCpuPieces p;
  const auto absmax = p.absmax;
  const std::size_t block = params.at("block_size").get<std::size_t>();
  p.absmax = [absmax, block](std::span<const float> b) { return absmax(b.size() < block && b.size() > 1 ? b.first(b.size() - 1) : b); };
  requantize_bnb_cpu(done, params, p);
}
}  // namespace mutant
