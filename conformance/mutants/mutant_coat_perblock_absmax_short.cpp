// Bug class: coat.act.perblock's tile absmax over all but the tile's last element (its bottom-right
// one: a loop bound one short), so a tile whose largest value comes last is scaled by a smaller
// absmax, and that value saturates. The edges' tiles are led by their absmax and a random tile's
// largest value is almost never its last one: only a tile ending on its maximum (special-blocks) shows it.
#include <cmath>
#include <limits>

#include "mutant_coat_act.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.act.perblock";
const char* const kBug = "coat-perblock-absmax-misses-last";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using namespace lowbit;
  const Tensor& input = done.require("input");
  const BlockMap tiles = block_map(done, "codes");
  std::vector<std::size_t> last(tiles.blocks);  // each tile's last element in memory order
  for (std::size_t i = 0; i < input.element_count(); ++i) last[tiles.block_of(i)] = i;
  std::vector<float> amax(tiles.blocks, std::numeric_limits<float>::quiet_NaN());
  for (std::size_t i = 0; i < input.element_count(); ++i)
    if (i != last[tiles.block_of(i)])
      amax[tiles.block_of(i)] = coat_act::absmax_step(amax[tiles.block_of(i)], input.value_as_float(i));
  std::vector<float> s(tiles.blocks);
  for (std::size_t g = 0; g < s.size(); ++g) s[g] = scale_from_absmax(amax[g], params);
  requantize_with_scales(done, params, s, coat_division(params));
}
}  // namespace mutant
