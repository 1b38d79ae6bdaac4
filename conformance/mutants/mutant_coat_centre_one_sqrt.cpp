// Bug class: COAT's centre computed as sqrt(A B) where the kernel computes sqrt(A) sqrt(B) (A, B:
// the group's max and min, each + 1e-30). The two differ by an ulp in some groups, and A B
// underflows for a group of tiny moments (the second moment's values are squares); the group's
// centre, scale and codes follow.
#include <cmath>

#include "mutant_coat_expand.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.optim.expand.e4m3";
const char* const kBug = "centre-sqrt-of-product";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  requantize_coat_expand(done, params, [](float a, float b, int expand_min) {
    return KAndCentre{reference_k(a, b, expand_min), std::sqrt(a * b)};  // the bug: one square root of the product
  });
}
}  // namespace mutant
