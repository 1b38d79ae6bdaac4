// Bug class: Adagrad's weight decay decoupled (the parameter scaled by 1 - lr wd, AdamW's way) where
// bitsandbytes' CPU step adds wd p to the gradient (L2) before the sum of squares and the update.
// Invisible at the format's default weight_decay 0: the default battery's steps with 0.01 catch it.
#include "mutant_bnb_rules.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.adagrad8bit.cpu";
const char* const kBug = "adagrad-decay-decoupled";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  namespace opt = lowbit::optimizer;
  restep_bnb_rule(done, params, "sum", nullptr,
                  [](float p, float g, float sum, std::int64_t step, const opt::BnbRuleScalars& s) {
                    opt::BnbRuleScalars no_l2 = s;
                    no_l2.wd = 0.0f;
                    const float decayed = s.decays ? p * s.decay : p;  // the bug: decoupled decay
                    return opt::bnb_rule_cpu_element(opt::BnbRule::Adagrad, decayed, g, sum, step, no_l2);
                  });
}
}  // namespace mutant
