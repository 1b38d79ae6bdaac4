// Bug class: COAT's per-group absmax propagating NaN (torch.amax's rule) where COAT's tl.max ignores it
// (maxnum on the GPU, np.nanmax in the interpreter): a group with a NaN gets a NaN scale, so every code
// of it is NaN and its stored scale NaN, where COAT scales the group by its other elements.
#include <cmath>
#include <limits>

#include "mutant_coat_act.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.act.pergroup";
const char* const kBug = "coat-act-group-max-keeps-nan";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  const auto division = params.at("division") == "ieee" ? lowbit::coat_act::Division::Ieee : lowbit::coat_act::Division::DivFull;
  requantize_groups(
      done, params, [](float s, bool has_nan) { return has_nan ? std::numeric_limits<float>::quiet_NaN() : s; },
      [division](float x, float s) { return lowbit::coat_act::div(x, s, division); });
}
}  // namespace mutant
