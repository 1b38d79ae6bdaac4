// Bug class: RMSprop's eps inside the square root, sqrt(s + eps), where bitsandbytes' CPU step (as
// torch.optim.RMSprop) adds it outside, sqrt(s) + eps. The state is the reference's; the parameter
// differs wherever s is not far above eps (every element of a step from a fresh state).
#include <bit>
#include <cmath>

#include "mutant_bnb_rules.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.rmsprop8bit.cpu";
const char* const kBug = "rmsprop-eps-inside-sqrt";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  namespace opt = lowbit::optimizer;
  restep_bnb_rule(done, params, "square_avg", "alpha",
                  [](float p, float g, float sq, std::int64_t step, const opt::BnbRuleScalars& s) {
                    const float state = opt::bnb_rule_cpu_element(opt::BnbRule::Rmsprop, p, g, sq, step, s).state;
                    g = s.fused ? std::fma(p, s.wd, g) : g + s.wd * p;
                    // the bug: eps under the root (torch's sqrt: a negative gives +NaN, as the reference's)
                    const float shifted = state + s.eps;
                    const float root = shifted < 0.0f ? std::bit_cast<float>(0x7FC00000u) : std::sqrt(shifted);
                    return opt::RuleElement{p + (s.neg_lr * g) / root, state};
                  });
}
}  // namespace mutant
