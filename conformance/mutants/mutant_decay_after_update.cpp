// Bug class: weight decay applied after the update instead of before it. bitsandbytes' CPU step
// decays the old parameter, then adds the update (p d + u); its CUDA kernel decays the updated one
// ((p + u) d). A CPU kernel written from kernels.cu has the CUDA order. Moments and codes are
// untouched: only param.next differs, and only where weight_decay > 0.
#include "lowbit/blockwise.hpp"
#include "lowbit/optimizer.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.adam8bit.cpu";
const char* const kBug = "weight-decay-after-update";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  namespace opt = lowbit::optimizer;
  const auto block = params.at("block_size").get<std::size_t>();
  opt::BnbAdamHyper h;
  h.lr = params.at("lr").get<double>();
  h.beta1 = params.at("beta1").get<double>();
  h.beta2 = params.at("beta2").get<double>();
  h.eps = params.at("eps").get<double>();
  h.weight_decay = params.at("weight_decay").get<double>();
  const opt::BnbAdamScalars s = opt::bnb_adam_scalars(h, done.require("step").i64().at(0));
  opt::BnbAdamScalars undecayed = s;
  undecayed.decays = false;
  auto dequantized = [&](const std::string& name) {
    return lowbit::blockwise::bnb_dequantize(done.require(name + ".codes").u8(), done.require(name + ".scale").f32(),
                                             done.require(name + ".qmap").f32(), block);
  };
  const std::vector<float> param = done.require("param").f32(), grad = done.require("grad").f32(),
                           m_old = dequantized("exp_avg"), v_old = dequantized("exp_avg_sq");
  std::vector<float> next(param.size());
  for (std::size_t i = 0; i < param.size(); ++i) {
    next[i] = opt::bnb_adam_cpu_element(param[i], grad[i], m_old[i], v_old[i], undecayed).param;
    if (s.decays) next[i] = next[i] * s.decay;  // the bug: the decay of the updated parameter
  }
  const std::vector<std::int64_t> shape = done.require("param.next").shape;
  done.add(lowbit::Tensor::from_f32("param.next", shape, next));
}
}  // namespace mutant
