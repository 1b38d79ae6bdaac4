// Bug class: Lion's sign(0) taken as +1 (a sign from the bits, x >= 0 ? 1 : -1), where bitsandbytes'
// CPU step (torch.sign) gives 0 and leaves the parameter where its decay put it. The interpolation
// beta1 m + (1 - beta1) g is exactly 0 only where the state and the gradient are: a fresh state
// under an exactly zero gradient (an embedding row no token touched), which only gradient-blocks'
// zero block gives; random gradients never are 0.
#include <cmath>

#include "mutant_bnb_rules.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.lion8bit.cpu";
const char* const kBug = "lion-sign-zero-positive";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  namespace opt = lowbit::optimizer;
  restep_bnb_rule(done, params, "exp_avg", "beta1",
                  [](float p, float g, float m, std::int64_t step, const opt::BnbRuleScalars& s) {
                    const float state = opt::bnb_rule_cpu_element(opt::BnbRule::Lion, p, g, m, step, s).state;
                    if (s.decays) p = p * s.decay;
                    const float c = m * s.b1 + g * s.w1;
                    const float dir = std::isnan(c) ? 0.0f : (c < 0.0f ? -1.0f : 1.0f);  // the bug: sign(0) = +1
                    return opt::RuleElement{s.fused ? std::fma(dir, s.neg_lr, p) : p + s.neg_lr * dir, state};
                  });
}
}  // namespace mutant
