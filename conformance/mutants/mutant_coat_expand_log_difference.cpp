// Bug class: the expansion's log2f(R) computed as log2f(A) - log2f(B) (R = A / B). The two agree to an
// ulp or so, and k = floor(log2f(100352) / log2f(R) * E) / E moves only where that quotient lies within
// an ulp of a multiple of 1/E: random moments never get there (docs/verifying-a-kernel.md, "What the
// battery reaches"); the battery's edges hold one group that does.
#include <cmath>

#include "mutant_coat_expand.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.optim.expand.e4m3";
const char* const kBug = "log-ratio-as-difference";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  requantize_coat_expand(done, params, [](float a, float b, int expand_min) {
    using lowbit::cuda::canonical;
    using lowbit::cuda::log2f;
    const auto e = static_cast<float>(expand_min);
    const float log_ratio = log2f(a) - log2f(b);  // the bug
    const float k = canonical(std::floor((log2f(100352.0f) / log_ratio) * e) / e);
    return KAndCentre{k, std::sqrt(a) * std::sqrt(b)};
  });
}
}  // namespace mutant
