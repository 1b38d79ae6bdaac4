// Bug class: AdEMAMix's alpha scheduler one step late, alpha_t = min((step - 1) alpha / t_alpha,
// alpha), where bitsandbytes' AdEMAMix.update_step uses the step it is taking (incremented first:
// alpha_t = alpha / t_alpha at step 1). The moments are the reference's; the parameter differs at
// every step before the schedule ends, and only with t_alpha set (the default battery's scheduled
// run: t_alpha 2, t_beta3 4).
#include <algorithm>

#include "lowbit/blockwise.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.ademamix8bit.cpu";
const char* const kBug = "ademamix-alpha-one-step-late";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  namespace opt = lowbit::optimizer;
  const auto block = params.at("block_size").get<std::size_t>();
  const auto real = [&](const char* key) { return params.at(key).get<double>(); };
  const auto whole = [&](const char* key) { return params.at(key).get<std::int64_t>(); };
  const opt::BnbAdemamixHyper h{.lr = real("lr"), .beta1 = real("beta1"), .beta2 = real("beta2"), .beta3 = real("beta3"),
                                .alpha = real("alpha"), .eps = real("eps"), .weight_decay = real("weight_decay"),
                                .t_alpha = whole("t_alpha"), .t_beta3 = whole("t_beta3"),
                                .fused = params.at("cpu_capability").get<std::string>() != "default"};
  const std::int64_t step = done.require("step").i64().at(0);
  opt::BnbAdemamixScalars s = opt::bnb_ademamix_scalars(h, step);
  if (h.t_alpha != 0)  // the bug: the previous step's alpha
    s.alpha = static_cast<float>(std::min(static_cast<double>(step - 1) * h.alpha / static_cast<double>(h.t_alpha), h.alpha));
  std::vector<std::vector<float>> old;
  for (const std::string name : {"exp_avg", "exp_avg_slow", "exp_avg_sq"})
    old.push_back(lowbit::blockwise::bnb_dequantize(done.require(name + ".codes").u8(), done.require(name + ".scale").f32(),
                                                    done.require(name + ".qmap").f32(), block));
  const std::vector<float> param = done.require("param").f32(), grad = done.require("grad").f32();
  std::vector<float> next(param.size());
  for (std::size_t i = 0; i < param.size(); ++i)
    next[i] = opt::bnb_ademamix_cpu_element(param[i], grad[i], old[0][i], old[1][i], old[2][i], s).param;
  done.add(lowbit::Tensor::from_f32("param.next", done.require("param.next").shape, next));
}
}  // namespace mutant
