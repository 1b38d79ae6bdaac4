// Bug class: a group of one magnitude (R = A / B = 1, log2f(R) = 0) given k = 1 by a guard against the
// division by zero, where COAT's kernel divides and stores k = +inf (docs/formats/coat-optimizer.md
// "Groups with one magnitude"). Random moments never have R = 1: an all-zero group, one value repeated,
// or one value at lane 0 with zeros elsewhere do.
#include <cmath>

#include "mutant_coat_expand.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.optim.expand.e4m3";
const char* const kBug = "unit-ratio-k-one";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  requantize_coat_expand(done, params, [](float a, float b, int expand_min) {
    const float log_ratio = lowbit::cuda::log2f(a / b);
    const float k = log_ratio == 0.0f ? 1.0f : reference_k(a, b, expand_min);  // the bug: the guard
    return KAndCentre{k, std::sqrt(a) * std::sqrt(b)};
  });
}
}  // namespace mutant
