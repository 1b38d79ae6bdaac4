// Bug class: COAT's per-group codes from x * (1 / S) instead of x / S (a kernel that takes the group's
// reciprocal once and multiplies): under a scale that is not a power of two the two round differently
// near the FP8 cast's thresholds. NaN handling kept right: where x or S is NaN the reference's division
// decides the NaN, so the only bug is the arithmetic.
#include <cmath>

#include "mutant_coat_act.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.act.pergroup";
const char* const kBug = "coat-act-reciprocal-instead-of-division";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  requantize_groups(
      done, params, [](float s, bool) { return s; },
      [](float x, float s) { return std::isnan(x) || std::isnan(s) ? x / s : x * (1.0f / s); });
}
}  // namespace mutant
