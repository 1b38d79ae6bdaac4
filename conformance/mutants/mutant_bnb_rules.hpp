#pragma once
// For the mutants of bitsandbytes' one-state 8-bit rules (bnb.lion8bit.cpu, bnb.momentum8bit.cpu,
// bnb.rmsprop8bit.cpu, bnb.adagrad8bit.cpu): the step recomputed from the case's inputs with a
// changed element (the bug), around the reference's own pieces: its scalars, its dequantizer and
// its CPU lookup-table quantizer for the new state. What the element returns is what the step keeps:
// the new parameter and the unquantized new state. A mutant calls the reference's element
// (bnb_rule_cpu_element) for what its bug leaves alone.
#include <cstdint>
#include <functional>
#include <string>

#include "lowbit/blockwise.hpp"
#include "lowbit/case.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"

namespace mutant {

using RuleElementFn = std::function<lowbit::optimizer::RuleElement(float param, float grad, float state_old,
                                                                   std::int64_t step,
                                                                   const lowbit::optimizer::BnbRuleScalars& s)>;

// The scalars of the case's params as the format passes them: `beta1` names the param that is the
// kernel's beta1 (Lion's beta1, SGD's momentum, RMSprop's alpha; null for Adagrad).
inline lowbit::optimizer::BnbRuleScalars rule_scalars(const nlohmann::json& params, const char* beta1) {
  lowbit::optimizer::BnbRuleHyper h;
  h.lr = params.at("lr").get<double>();
  h.beta1 = beta1 ? params.at(beta1).get<double>() : 0.0;
  h.beta2 = params.contains("beta2") ? params.at("beta2").get<double>() : 0.0;
  h.eps = params.contains("eps") ? params.at("eps").get<double>() : 0.0;
  h.weight_decay = params.at("weight_decay").get<double>();
  h.fused = params.at("cpu_capability").get<std::string>() != "default";
  return lowbit::optimizer::bnb_rule_scalars(h);
}

inline void restep_bnb_rule(lowbit::Case& done, const nlohmann::json& params, const std::string& state,
                            const char* beta1, const RuleElementFn& element) {
  using namespace lowbit;
  const auto block = params.at("block_size").get<std::size_t>();
  const optimizer::BnbRuleScalars s = rule_scalars(params, beta1);
  const std::int64_t step = done.require("step").i64().at(0);
  const std::vector<float> param = done.require("param").f32(), grad = done.require("grad").f32();
  const std::vector<float> qmap = done.require(state + ".qmap").f32();
  const std::vector<float> old =
      blockwise::bnb_dequantize(done.require(state + ".codes").u8(), done.require(state + ".scale").f32(), qmap, block);
  std::vector<float> next(param.size()), updated(param.size());
  for (std::size_t i = 0; i < param.size(); ++i) {
    const optimizer::RuleElement e = element(param[i], grad[i], old[i], step, s);
    next[i] = e.param;
    updated[i] = e.state;
  }
  done.add(Tensor::from_f32("param.next", done.require("param.next").shape, next));
  const blockwise::Quantized q = blockwise::bnb_quantize(updated, qmap, block, blockwise::BnbBackend::CpuLut);
  done.add(Tensor::from_bytes(state + ".codes.next", DType::U8, done.require(state + ".codes.next").shape, q.codes));
  done.add(Tensor::from_f32(state + ".scale.next", done.require(state + ".scale.next").shape, q.scale));
}

}  // namespace mutant
