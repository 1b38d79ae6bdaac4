// Bug class: COAT's expansion exponent k not floored to a multiple of 1/expand_min: k =
// log2f(100352) / log2f(A / B) as it comes, where the kernel stores floor(that * E) / E. Every
// group's k, scale and most of its codes change.
#include "mutant_coat_expand.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.optim.expand.e4m3";
const char* const kBug = "k-not-floored";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  requantize_coat_expand(done, params, [](float a, float b, int) {
    using lowbit::cuda::canonical;
    const float k = canonical(lowbit::cuda::log2f(100352.0f) / lowbit::cuda::log2f(a / b));  // the bug: no floor
    return KAndCentre{k, std::sqrt(a) * std::sqrt(b)};
  });
}
}  // namespace mutant
