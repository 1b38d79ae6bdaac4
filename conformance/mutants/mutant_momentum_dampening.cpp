// Bug class: SGD's momentum buffer dampened as an exponential average, buf = m buf + (1 - m) g,
// where bitsandbytes' CPU step (SGD8bit and LARS8bit alike) adds the whole gradient, buf = m buf + g,
// and never reads the dampening it is passed. A kernel written from torch.optim.SGD with
// dampening = momentum, or from Lion's and Adam's moments, has it. Step 1 copies the gradient either
// way: the buffer and the parameter differ from step 2.
#include <cmath>

#include "mutant_bnb_rules.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.momentum8bit.cpu";
const char* const kBug = "momentum-dampened";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  namespace opt = lowbit::optimizer;
  restep_bnb_rule(done, params, "momentum_buffer", "momentum",
                  [](float p, float g, float b, std::int64_t step, const opt::BnbRuleScalars& s) {
                    g = s.fused ? std::fma(p, s.wd, g) : g + s.wd * p;
                    b = step == 1 ? g : b * s.b1 + g * s.w1;  // the bug: (1 - momentum) g
                    return opt::RuleElement{s.fused ? std::fma(b, s.neg_lr, p) : p + s.neg_lr * b, b};
                  });
}
}  // namespace mutant
