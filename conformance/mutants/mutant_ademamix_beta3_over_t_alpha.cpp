// Bug class: AdEMAMix's beta3 scheduler written with t_alpha where bitsandbytes' AdEMAMix.update_step
// divides the step by t_beta3 (a copy of the alpha scheduler's line). The same whenever the two
// periods are equal, as the battery's scheduled run had them (2 and 2); with t_beta3 4 the slow
// moment's beta3_t, so its absmax, codes and the parameter, differ from step 1.
#include "lowbit/blockwise.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.ademamix8bit.cpu";
const char* const kBug = "ademamix-beta3-over-t-alpha";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  namespace opt = lowbit::optimizer;
  using lowbit::blockwise::BnbBackend;
  const auto block = params.at("block_size").get<std::size_t>();
  const auto real = [&](const char* key) { return params.at(key).get<double>(); };
  const auto whole = [&](const char* key) { return params.at(key).get<std::int64_t>(); };
  opt::BnbAdemamixHyper h{.lr = real("lr"), .beta1 = real("beta1"), .beta2 = real("beta2"), .beta3 = real("beta3"),
                          .alpha = real("alpha"), .eps = real("eps"), .weight_decay = real("weight_decay"),
                          .t_alpha = whole("t_alpha"), .t_beta3 = whole("t_beta3"),
                          .fused = params.at("cpu_capability").get<std::string>() != "default"};
  if (h.t_alpha != 0 && h.t_beta3 != 0) h.t_beta3 = h.t_alpha;  // the bug: step / t_alpha in beta3's schedule
  const opt::BnbAdemamixScalars s = opt::bnb_ademamix_scalars(h, done.require("step").i64().at(0));
  const char* const names[3] = {"exp_avg", "exp_avg_slow", "exp_avg_sq"};
  std::vector<std::vector<float>> old, updated(3);
  for (const std::string name : names)
    old.push_back(lowbit::blockwise::bnb_dequantize(done.require(name + ".codes").u8(), done.require(name + ".scale").f32(),
                                                    done.require(name + ".qmap").f32(), block));
  const std::vector<float> param = done.require("param").f32(), grad = done.require("grad").f32();
  std::vector<float> next(param.size());
  for (std::size_t i = 0; i < param.size(); ++i) {
    const opt::AdemamixElement a = opt::bnb_ademamix_cpu_element(param[i], grad[i] * 1.0f, old[0][i], old[1][i], old[2][i], s);
    next[i] = a.param;
    updated[0].push_back(a.m1);
    updated[1].push_back(a.m2);
    updated[2].push_back(a.nu);
  }
  done.add(lowbit::Tensor::from_f32("param.next", done.require("param.next").shape, next));
  for (int k = 0; k < 3; ++k) {
    const std::string name = names[k];
    const auto q = lowbit::blockwise::bnb_quantize(updated[k], done.require(name + ".qmap").f32(), block, BnbBackend::CpuLut);
    done.add(lowbit::Tensor::from_bytes(name + ".codes.next", lowbit::DType::U8, done.require(name + ".codes.next").shape, q.codes));
    done.add(lowbit::Tensor::from_f32(name + ".scale.next", done.require(name + ".scale.next").shape, q.scale));
  }
}
}  // namespace mutant
