// Bug class: COAT's per-block tile absmax folded from the tile's first |x| with a > comparison
// (m = |x_0|; if (|x| > m) m = |x|): a tile led by a NaN keeps NaN, since no number compares greater,
// where COAT's tl.max skips NaN and gives the tile's largest number. A tile led by a number skips its
// NaNs as COAT does. The codes and the stored scale follow from the kernel's own S.
#include <cmath>

#include "mutant_coat_act.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.act.perblock";
const char* const kBug = "coat-perblock-absmax-led-by-nan";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using namespace lowbit;
  const Tensor& input = done.require("input");
  const BlockMap tiles = block_map(done, "codes");
  std::vector<float> m(tiles.blocks);
  std::vector<bool> started(tiles.blocks, false);
  for (std::size_t i = 0; i < input.element_count(); ++i) {  // memory order: a tile's first element is its (0, 0)
    const std::size_t t = tiles.block_of(i);
    const float a = std::fabs(input.value_as_float(i));
    if (!started[t]) {
      m[t] = a;
      started[t] = true;
    } else if (a > m[t]) {
      m[t] = a;
    }
  }
  std::vector<float> s(tiles.blocks);
  for (std::size_t t = 0; t < s.size(); ++t) s[t] = scale_from_absmax(m[t], params);
  requantize_with_scales(done, params, s, coat_division(params));
}
}  // namespace mutant
