// Bug class: Lion's sign taken before the interpolation instead of after it. bitsandbytes' CPU step
// (as the Lion paper) moves the parameter by lr * sign(beta1 m + (1 - beta1) g); this kernel
// interpolates the signs, beta1 sign(m) + (1 - beta1) sign(g), so that a step is no longer +-lr (at
// step 1, with m = 0, it is 0.1 lr). The state's update is the reference's: only param.next differs.
#include "mutant_bnb_rules.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.lion8bit.cpu";
const char* const kBug = "lion-sign-before-interpolation";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  namespace opt = lowbit::optimizer;
  restep_bnb_rule(done, params, "exp_avg", "beta1",
                  [](float p, float g, float m, std::int64_t step, const opt::BnbRuleScalars& s) {
                    const auto sign = [](float a) { return static_cast<float>((0.0f < a) - (a < 0.0f)); };
                    const float state = opt::bnb_rule_cpu_element(opt::BnbRule::Lion, p, g, m, step, s).state;
                    if (s.decays) p = p * s.decay;
                    const float dir = s.b1 * sign(m) + s.w1 * sign(g);  // the bug: signs, then interpolation
                    return opt::RuleElement{p + s.neg_lr * dir, state};
                  });
}
}  // namespace mutant
