// Bug class: SGD's L2 term skipped when weight_decay is 0, where bitsandbytes' CPU step adds it
// always (grad.add_(p_fp32, alpha=weight_decay), even for 0). The same wherever the parameter is
// finite (g + 0 p = g); a parameter made NaN or infinite by an earlier step gives 0 Inf = NaN in the
// library's gradient and buffer, and here the gradient as it is: only gradient-blocks' later steps,
// whose parameters a NaN or infinite gradient has reached, show it.
#include <cmath>

#include "mutant_bnb_rules.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.momentum8bit.cpu";
const char* const kBug = "momentum-l2-skipped-at-zero-decay";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  namespace opt = lowbit::optimizer;
  restep_bnb_rule(done, params, "momentum_buffer", "momentum",
                  [](float p, float g, float b, std::int64_t step, const opt::BnbRuleScalars& s) {
                    if (s.wd != 0.0f) g = s.fused ? std::fma(p, s.wd, g) : g + s.wd * p;  // the bug: none at 0
                    b = step == 1 ? g : b * s.b1 + g;
                    return opt::RuleElement{s.fused ? std::fma(b, s.neg_lr, p) : p + s.neg_lr * b, b};
                  });
}
}  // namespace mutant
