// Bug class: COAT's expansion minimum found by a plain loop, the smallest nonzero |x| of the group
// (capped at 1e9), where the kernel's shuffle tree skips a zero only when it arrives, so that a zero at
// lane z >= 1 hides the lanes below it in the tree (docs/formats/coat-optimizer.md "Zeros hide
// subtrees"). Random moments hold no exact zero: only a gradient with zeros shows it.
#include <algorithm>
#include <cmath>

#include "mutant_coat_expand.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.optim.expand.e4m3";
const char* const kBug = "min-exact";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  requantize_coat_expand(done, params, reference_k_and_centre, [](std::span<const float> values) {
    lowbit::coat::GroupStats st = lowbit::coat::expand_group_stats(values);  // the maximum is the kernel's
    st.min = 1e9f;
    for (float x : values)
      if (std::fabs(x) > 0.0f) st.min = std::min(st.min, std::fabs(x));  // the bug: no holes
    return st;
  });
}
}  // namespace mutant
