// Bug class: COAT's per-group absmax started from 0 (max(0, |x|...) skipping NaN) where COAT's tl.max
// over a group made only of NaNs gives NaN: such a group's scale is the floor's 1e-10 / 448 (bf16
// 0x2B7B) where COAT's is NaN. Its codes are NaN either way (NaN / S), and a group holding any number
// has the same absmax both ways, so only a group of NaNs alone (special-blocks) shows it.
#include <cmath>

#include "mutant_coat_act.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.act.pergroup";
const char* const kBug = "coat-act-all-nan-group-absmax-zero";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  const float floor_scale = scale_from_absmax(0.0f, params);
  requantize_groups(
      done, params, [floor_scale](float s, bool) { return std::isnan(s) ? floor_scale : s; }, coat_division(params));
}
}  // namespace mutant
