// The variants of the optimizer steps (torchao.adam.codebook*, bnb.*8bit.cpu and .cuda): one step
// recomputed from the case's inputs with one rule changed, the ways optimizer implementations are known
// to differ: the lerp weights exchanged, decay before or after the update (bitsandbytes' CPU and CUDA
// orders), Lion's sign before the interpolation, torch.optim.SGD's dampening, Keras' eps under the root,
// AdamW's decoupled decay for an L2 one, the CPU's decayed numerator in the CUDA kernel, AdEMAMix's alpha
// scheduler one step late. Everything else is the reference's own: its scalars, its dequantizer, its
// element functions (the CUDA model's slot and launch) and the quantizer its state uses.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "../registry/formats_optimizer_io.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/optimizer.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"
#include "lowbit/torch_cpu_ops.hpp"
#include "variants.hpp"

namespace lowbit::diagnosis {

namespace {

namespace opt = lowbit::optimizer;

// ---- bitsandbytes' CPU step ---------------------------------------------------------------------

// One element's new parameter and unquantized new states (in the case's state order), from its
// parameter, gradient and dequantized old states.
struct Stepped {
  float param;
  std::vector<float> states;
};
using BnbElement = std::function<Stepped(float p, float g, const std::vector<float>& old)>;

// bitsandbytes' CPU step on the case's inputs with `element` for each element: the states dequantized
// (qmap[code] * absmax), the gradient as g.float() * gnorm_scale reads it, the new states requantized with
// the CPU lookup table, as the reference's step does.
Case bnb_cpu_restep(const Case& e, const nlohmann::json& p, const std::vector<std::string>& states,
                    const BnbElement& element) {
  const std::size_t block = positive_size_param(p, "block_size");
  const std::vector<float> param = e.require("param").f32(), grad = e.require("grad").f32();
  std::vector<std::vector<float>> old;
  for (const std::string& s : states)
    old.push_back(blockwise::bnb_dequantize(e.require(s + ".codes").u8(), e.require(s + ".scale").f32(),
                                            e.require(s + ".qmap").f32(), block));
  std::vector<float> next(param.size());
  std::vector<std::vector<float>> updated(states.size(), std::vector<float>(param.size()));
  std::vector<float> olds(states.size());
  for (std::size_t i = 0; i < param.size(); ++i) {
    for (std::size_t k = 0; k < states.size(); ++k) olds[k] = old[k].at(i);
    const Stepped s = element(param[i], grad.at(i) * 1.0f, olds);
    next[i] = s.param;
    for (std::size_t k = 0; k < states.size(); ++k) updated[k][i] = s.states.at(k);
  }
  Case c = e;
  c.add(Tensor::from_f32("param.next", e.require("param.next").shape, next));
  for (std::size_t k = 0; k < states.size(); ++k) {
    const blockwise::Quantized q =
        blockwise::bnb_quantize(updated[k], e.require(states[k] + ".qmap").f32(), block, blockwise::BnbBackend::CpuLut);
    const std::string codes = states[k] + ".codes.next", scale = states[k] + ".scale.next";
    c.add(Tensor::from_bytes(codes, DType::U8, e.require(codes).shape, q.codes));
    c.add(Tensor::from_f32(scale, e.require(scale).shape, q.scale));
  }
  return c;
}

std::int64_t step_of(const Case& e) { return e.require("step").i64().at(0); }

// A one-state rule's element changed: element(p, g, state, step, the reference's scalars).
using RuleElementFn =
    std::function<opt::RuleElement(float p, float g, float st, std::int64_t step, const opt::BnbRuleScalars& s)>;
KnownVariant one_state_variant(const optimizer_io::BnbOneState& r, std::string name, std::string description,
                               RuleElementFn element) {
  return {std::move(name), std::move(description),
          [r, element](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
            const opt::BnbRuleScalars s = opt::bnb_rule_scalars(optimizer_io::bnb_rule_hyper(p, r.beta1, r.beta2));
            const std::int64_t step = step_of(e);
            return bnb_cpu_restep(e, p, {r.state}, [&](float pv, float g, const std::vector<float>& old) {
              const opt::RuleElement out = element(pv, g, old[0], step, s);
              return Stepped{out.param, {out.state}};
            });
          }};
}

using opt::bnb_rule_cpu_element;
using opt::torch_cpu::add_alpha;

constexpr const char* kLionSignBeforeInterpolation =
    "the reference with Lion's sign taken before the interpolation, beta1 sign(m) + (1 - beta1) sign(g), where the "
    "Lion paper and bitsandbytes take sign(beta1 m + (1 - beta1) g)";
// Lion's direction beta1 sign(m) + (1 - beta1) sign(g): the signs interpolated instead of the sign of
// the interpolation (the Lion paper's and bitsandbytes' order), the parameter moved by -lr times it as a
// kernel writes it out (each operation rounded: no torch op fuses a direction that is not +-1)
opt::RuleElement lion_signs_interpolated(float p, float g, float m, std::int64_t step, const opt::BnbRuleScalars& s) {
  const float state = bnb_rule_cpu_element(opt::BnbRule::Lion, p, g, m, step, s).state;
  if (s.decays) p = p * s.decay;
  const float dir = opt::torch_cpu::sign(m) * s.b1 + opt::torch_cpu::sign(g) * s.w1;
  return {opt::torch_cpu::plus(p, s.neg_lr * dir), state};
}

constexpr const char* kLionSignZeroPositive =
    "the reference with Lion's sign(0) taken as +1, where torch.sign gives 0 (a zero interpolation: a fresh state "
    "under a zero gradient)";
// Lion's direction with sign(0) = +1: the reference's element, and where its interpolation is exactly 0
// (the parameter only decayed) the step -lr the kernel then takes
opt::RuleElement lion_sign_zero_positive(float p, float g, float m, std::int64_t step, const opt::BnbRuleScalars& s) {
  opt::RuleElement e = bnb_rule_cpu_element(opt::BnbRule::Lion, p, g, m, step, s);
  if (m * s.b1 + g * s.w1 == 0.0f) e.param = add_alpha(s.decays ? p * s.decay : p, 1.0f, s.neg_lr, s.fused);
  return e;
}

constexpr const char* kMomentumDampened =
    "the reference with the momentum buffer dampened, momentum buf + (1 - momentum) g from step 2 (torch.optim.SGD "
    "with dampening = momentum), where bitsandbytes adds the whole gradient";
// torch.optim.SGD's buffer with dampening = momentum: buf = momentum buf + (1 - momentum) g from step 2,
// written out (each operation rounded); bitsandbytes adds the whole gradient: no dampening
opt::RuleElement momentum_dampened(float p, float g, float buf, std::int64_t step, const opt::BnbRuleScalars& s) {
  if (step == 1) return bnb_rule_cpu_element(opt::BnbRule::Momentum, p, g, buf, step, s);  // the copy of the gradient
  const float gd = add_alpha(g, p, s.wd, s.fused);
  const float next = buf * s.b1 + gd * s.w1;
  return {add_alpha(p, next, s.neg_lr, s.fused), next};
}

constexpr const char* kMomentumL2Skipped =
    "the reference with SGD's L2 term skipped when weight_decay is 0, where bitsandbytes adds wd p to the gradient "
    "always (0 times a NaN or infinite parameter is NaN)";
// the L2 term left out at weight_decay 0: the gradient as it is (bitsandbytes: g + 0 p, NaN for a
// non-finite p), the buffer and the parameter as the reference's element makes them
opt::RuleElement momentum_l2_skipped(float p, float g, float buf, std::int64_t step, const opt::BnbRuleScalars& s) {
  if (s.wd != 0.0f) return bnb_rule_cpu_element(opt::BnbRule::Momentum, p, g, buf, step, s);
  const float next = step == 1 ? g : opt::torch_cpu::plus(buf * s.b1, g);
  return {add_alpha(p, next, s.neg_lr, s.fused), next};
}

constexpr const char* kRmspropEpsInsideSqrt =
    "the reference with RMSprop's eps under the root, sqrt(s + eps) (Keras' rule), where torch and bitsandbytes take "
    "sqrt(s) + eps";
// Keras' RMSprop: eps under the root, sqrt(s + eps) (torch and bitsandbytes: sqrt(s) + eps)
opt::RuleElement rmsprop_eps_inside(float p, float g, float st, std::int64_t step, const opt::BnbRuleScalars& s) {
  const float state = bnb_rule_cpu_element(opt::BnbRule::Rmsprop, p, g, st, step, s).state;
  const float gd = add_alpha(g, p, s.wd, s.fused);
  return {opt::torch_cpu::plus(p, (s.neg_lr * gd) / opt::torch_cpu::sqrt(state + s.eps)), state};
}

constexpr const char* kAdagradDecayDecoupled =
    "the reference with Adagrad's weight decay decoupled, p (1 - lr wd) before the update (AdamW's rule), where "
    "bitsandbytes adds wd p to the gradient (L2)";
// AdamW's decoupled decay, p (1 - lr wd), where bitsandbytes adds wd p to the gradient (L2): the
// reference's element without the L2 term on the decayed parameter
opt::RuleElement adagrad_decay_decoupled(float p, float g, float st, std::int64_t step, const opt::BnbRuleScalars& s) {
  opt::BnbRuleScalars no_l2 = s;
  no_l2.wd = 0.0f;
  return bnb_rule_cpu_element(opt::BnbRule::Adagrad, s.decays ? p * s.decay : p, g, st, step, no_l2);
}

// ---- bitsandbytes' CUDA launch --------------------------------------------------------------------

// The case with param.next and the named states' codes and absmax after `launch` (the reference's
// launch on the case's parameter and moments, in place).
Case relaunched(const Case& e, const std::vector<std::string>& states,
                const std::function<void(std::vector<float>& param, const std::vector<float>& grad,
                                         std::vector<opt::Moment>& moments)>& launch) {
  std::vector<float> param = e.require("param").f32();
  std::vector<opt::Moment> moments;
  for (const std::string& s : states) moments.push_back(optimizer_io::read_moment(e, s, false));
  launch(param, e.require("grad").f32(), moments);
  std::vector<Tensor> out = {Tensor::from_f32("param.next", e.require("param.next").shape, param)};
  for (std::size_t k = 0; k < states.size(); ++k) optimizer_io::write_moment(out, states[k], moments[k], false);
  return with_outputs(e, std::move(out));
}

KnownVariant slot_variant(const optimizer_io::BnbOneState& r, std::string name, std::string description,
                          opt::BnbRuleCudaSlot slot) {
  return {std::move(name), std::move(description),
          [r, slot](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
            const opt::BnbRuleHyper h = optimizer_io::bnb_rule_hyper(p, r.beta1, r.beta2);
            const std::int64_t step = step_of(e);
            return relaunched(
                e, {r.state},
                [&](std::vector<float>& param, const std::vector<float>& grad, std::vector<opt::Moment>& m) {
                  opt::bnb_rule_cuda_step(param, grad, step, m[0], h, slot);
                });
          }};
}

// The scalars without the weight decay: the reference's slot then adds no L2 term and no decay.
opt::BnbRuleCudaScalars without_decay(opt::BnbRuleCudaScalars s) {
  s.wd = 0.0f;
  return s;
}

using opt::bnb_rule_cuda_element;

constexpr const char* kDecayAfterUpdateCuda =
    "the reference with Lion's weight decay after the update, (p - u)(1 - lr wd), where bitsandbytes' CUDA Adam "
    "kernel places it; its Lion kernel decays first";
// Lion's decay of the updated parameter, where bitsandbytes' Adam kernel places it
opt::RuleElement lion_decay_after(float p, float g, float s0, std::int64_t step, const opt::BnbRuleCudaScalars& s) {
  opt::RuleElement e = bnb_rule_cuda_element(opt::BnbRule::Lion, p, g, s0, step, without_decay(s));
  if (s.wd > 0.0f) e.param = e.param * s.decay;
  return e;
}

// the L2 term as the kernel adds it, then (1 - momentum) on the gradient from step 2 (step 1 copies it)
opt::RuleElement momentum_dampened_cuda(float p, float g, float s0, std::int64_t step,
                                        const opt::BnbRuleCudaScalars& s) {
  float gd = s.wd > 0.0f ? std::fma(p, s.wd, g) : g;
  if (step != 1) gd = s.w1 * gd;
  return bnb_rule_cuda_element(opt::BnbRule::Momentum, p, gd, s0, step, without_decay(s));
}

// the reference's state, the parameter's root taken of s + eps
opt::RuleElement rmsprop_eps_inside_cuda(float p, float g, float s0, std::int64_t step,
                                         const opt::BnbRuleCudaScalars& s) {
  opt::RuleElement e = bnb_rule_cuda_element(opt::BnbRule::Rmsprop, p, g, s0, step, s);
  e.param = std::fma(-s.lr, g / std::sqrt(e.state + s.eps), p);
  return e;
}

constexpr const char* kAdagradDecayedNumeratorCuda =
    "the reference with Adagrad's parameter dividing the decayed gradient g + wd p (bitsandbytes' CPU back end's "
    "rule), where its CUDA kernel divides the gradient as loaded";
// the decayed gradient in the numerator too: the reference's slot on g + wd p without the L2 term
opt::RuleElement adagrad_decayed_numerator(float p, float g, float s0, std::int64_t step,
                                           const opt::BnbRuleCudaScalars& s) {
  const float gd = s.wd > 0.0f ? std::fma(p, s.wd, g) : g;
  return bnb_rule_cuda_element(opt::BnbRule::Adagrad, p, gd, s0, step, without_decay(s));
}

// The one-state rules' variants, on the CPU (an element of the CPU step) or on CUDA (a slot of the launch).
struct RuleVariant {
  opt::BnbRule rule;
  const char* name;
  opt::RuleElement (*cpu)(float p, float g, float st, std::int64_t step, const opt::BnbRuleScalars& s);
  opt::RuleElement (*cuda)(float p, float g, float s0, std::int64_t step, const opt::BnbRuleCudaScalars& s);
  const char* description;
};
constexpr RuleVariant kRuleVariants[] = {
    {opt::BnbRule::Lion, "lion-sign-before-interpolation", lion_signs_interpolated, nullptr,
     kLionSignBeforeInterpolation},
    {opt::BnbRule::Lion, "decay-after-update", nullptr, lion_decay_after, kDecayAfterUpdateCuda},
    {opt::BnbRule::Lion, "lion-sign-zero-positive", lion_sign_zero_positive, nullptr, kLionSignZeroPositive},
    {opt::BnbRule::Momentum, "momentum-dampened", momentum_dampened, momentum_dampened_cuda, kMomentumDampened},
    {opt::BnbRule::Momentum, "momentum-l2-skipped-at-zero-decay", momentum_l2_skipped, nullptr, kMomentumL2Skipped},
    {opt::BnbRule::Rmsprop, "rmsprop-eps-inside-sqrt", rmsprop_eps_inside, rmsprop_eps_inside_cuda,
     kRmspropEpsInsideSqrt},
    {opt::BnbRule::Adagrad, "adagrad-decay-decoupled", adagrad_decay_decoupled, nullptr, kAdagradDecayDecoupled},
    {opt::BnbRule::Adagrad, "adagrad-decayed-numerator", nullptr, adagrad_decayed_numerator,
     kAdagradDecayedNumeratorCuda}};

// bitsandbytes' CPU Adam with the CUDA kernel's order: the decay of the updated parameter.
std::optional<Case> adam_decay_after_update(const Case& e, const nlohmann::json& p) {
  const opt::BnbAdamScalars s = opt::bnb_adam_scalars(optimizer_io::bnb_adam_hyper(p), step_of(e));
  opt::BnbAdamScalars undecayed = s;
  undecayed.decays = false;
  return bnb_cpu_restep(e, p, {"exp_avg", "exp_avg_sq"}, [&](float pv, float g, const std::vector<float>& old) {
    const opt::AdamElement a = opt::bnb_adam_cpu_element(pv, g, old[0], old[1], undecayed);
    return Stepped{s.decays ? a.param * s.decay : a.param, {a.exp_avg, a.exp_avg_sq}};
  });
}

// AdEMAMix's alpha scheduler read one step late: alpha_t of step - 1 (AdEMAMix.update_step increments
// the step first, so step 1 has alpha / t_alpha).
std::optional<Case> ademamix_alpha_late(const Case& e, const nlohmann::json& p) {
  const opt::BnbAdemamixHyper h = optimizer_io::bnb_ademamix_hyper(p);
  const std::int64_t step = step_of(e);
  if (h.t_alpha == 0) return std::nullopt;  // no scheduler: nothing to be late
  opt::BnbAdemamixScalars s = opt::bnb_ademamix_scalars(h, step);
  s.alpha = opt::bnb_ademamix_scalars(h, step - 1).alpha;
  return bnb_cpu_restep(
      e, p, {"exp_avg", "exp_avg_slow", "exp_avg_sq"}, [&](float pv, float g, const std::vector<float>& old) {
        const opt::AdemamixElement a = opt::bnb_ademamix_cpu_element(pv, g, old[0], old[1], old[2], s);
        return Stepped{a.param, {a.m1, a.m2, a.nu}};
      });
}

// AdEMAMix's beta3 scheduler over t_alpha (the alpha scheduler's period) where bitsandbytes divides the
// step by t_beta3: the reference's CPU step with t_beta3 given t_alpha's value, both schedulers on.
std::optional<Case> ademamix_beta3_over_t_alpha(const Case& e, const nlohmann::json& p) {
  opt::BnbAdemamixHyper h = optimizer_io::bnb_ademamix_hyper(p);
  if (h.t_alpha == 0 || h.t_beta3 == 0 || h.t_alpha == h.t_beta3) return std::nullopt;  // nothing to tell apart
  h.t_beta3 = h.t_alpha;
  const opt::BnbAdemamixScalars s = opt::bnb_ademamix_scalars(h, step_of(e));
  return bnb_cpu_restep(
      e, p, {"exp_avg", "exp_avg_slow", "exp_avg_sq"}, [&](float pv, float g, const std::vector<float>& old) {
        const opt::AdemamixElement a = opt::bnb_ademamix_cpu_element(pv, g, old[0], old[1], old[2], s);
        return Stepped{a.param, {a.m1, a.m2, a.nu}};
      });
}

// bitsandbytes' CPU step over whole blocks only: the reference's step with the partial last block's
// parameter, codes and absmax as the case's inputs hold them (an in-place kernel that never reached them).
std::optional<Case> tail_not_stepped(const Case& e, const nlohmann::json& p) {
  const std::size_t block = positive_size_param(p, "block_size");
  const Tensor& param = e.require("param");
  const std::size_t n = param.element_count(), whole = n / block * block;
  if (whole == n || param.dtype != DType::F32) return std::nullopt;  // no tail (or a bf16 parameter: not this variant's)
  const auto at = [whole](auto& v) { return v.begin() + static_cast<std::ptrdiff_t>(whole); };
  const Case ref = with_outputs(e, find_format(e.format())->run(e, p, 1));  // the reference's step, then its tail undone
  std::vector<float> next = ref.require("param.next").f32();
  const std::vector<float> before = param.f32();
  std::copy(at(before), before.end(), at(next));
  std::vector<Tensor> out = {Tensor::from_f32("param.next", e.require("param.next").shape, next)};
  for (const Tensor& t : e.tensors()) {
    if (!t.name.ends_with(".codes") || !e.find(t.name + ".next")) continue;
    const std::string state = t.name.substr(0, t.name.size() - 6);
    std::vector<std::uint8_t> codes = ref.require(t.name + ".next").u8();
    const std::vector<std::uint8_t> old = t.u8();
    std::copy(at(old), old.end(), at(codes));
    std::vector<float> scale = ref.require(state + ".scale.next").f32();
    scale.back() = e.require(state + ".scale").f32().back();
    out.push_back(Tensor::from_bytes(t.name + ".next", DType::U8, e.require(t.name + ".next").shape, codes));
    out.push_back(Tensor::from_f32(state + ".scale.next", e.require(state + ".scale.next").shape, scale));
  }
  return with_outputs(e, std::move(out));
}

// ---- torchao's Adam -----------------------------------------------------------------------------

// torchao's step on a codebook state with the moments' lerp weights exchanged: beta where torch.lerp
// is given 1 - beta, so that the new gradient takes the weight the history should keep. The parameter
// written back as the reference writes it (float32, or bf16 rounded to nearest even or stochastically).
std::optional<Case> torchao_lerp_swapped(const Case& e, const nlohmann::json& p) {
  const Tensor& param_in = e.require("param");
  if (param_in.dtype != DType::F32 && param_in.dtype != DType::BF16) return std::nullopt;
  const std::size_t block = positive_size_param(p, "block_size");
  const opt::AdamHyper h = optimizer_io::torchao_adam_hyper(e, p);
  opt::TorchaoAdamScalars s = opt::torchao_adam_scalars(h, optimizer_io::scalar(e, "step") + 1.0f);
  s.w1 = static_cast<float>(h.beta1);  // torch.lerp's weight: beta as the float32 it becomes
  s.w2 = static_cast<float>(h.beta2);
  const std::vector<float> param = optimizer_io::widened(param_in), grad = optimizer_io::widened(e.require("grad"));
  const std::vector<std::int32_t> draws =
      p.at("bf16_stochastic_round").get<bool>() ? e.require("sr_random").i32() : std::vector<std::int32_t>{};
  const auto dtype = param_in.dtype == DType::BF16 ? opt::ParamDtype::BFloat16 : opt::ParamDtype::Float32;
  const char* const names[2] = {"exp_avg", "exp_avg_sq"};
  opt::Moment moments[2];
  std::vector<float> old[2], updated[2];
  for (int k = 0; k < 2; ++k) {
    moments[k] = optimizer_io::read_moment(e, names[k], false);
    if (moments[k].codes.size() != param.size()) return std::nullopt;  // packed codes: not this variant's
    old[k] = opt::dequantize(moments[k], opt::TorchaoState::Codebook, block);
    updated[k].resize(param.size());
  }
  std::vector<float> next(param.size());
  for (std::size_t i = 0; i < param.size(); ++i) {
    const opt::AdamElement a = opt::torchao_adam_element(param[i], grad.at(i), old[0][i], old[1][i], s);
    next[i] = optimizer_io::written(a.param, dtype, s.fused, draws, i);
    updated[0][i] = a.exp_avg;
    updated[1][i] = a.exp_avg_sq;
  }
  Case c = e;
  c.add(optimizer_io::narrowed("param.next", e.require("param.next"), next));
  for (int k = 0; k < 2; ++k) {
    const blockwise::Quantized q = blockwise::torchao_quantize(updated[k], moments[k].qmap, block);
    const std::string codes = std::string(names[k]) + ".codes.next", scale = std::string(names[k]) + ".scale.next";
    const Tensor& was = e.require(codes);
    c.add(Tensor::from_bytes(codes, was.dtype, was.shape, q.codes));
    c.add(Tensor::from_f32(scale, e.require(scale).shape, q.scale));
  }
  return c;
}

// AdEMAMix's CUDA launch with the alpha scheduler one step late.
std::optional<Case> ademamix_alpha_late_cuda(const Case& e, const nlohmann::json& p) {
  const opt::BnbAdemamixHyper h = optimizer_io::bnb_ademamix_hyper(p);
  const std::int64_t step = step_of(e);
  if (h.t_alpha == 0 || step < 1 || step > INT32_MAX || e.require("param").element_count() % 256 != 0)
    return std::nullopt;  // no scheduler to be late, or a case the launch refuses
  const auto t = static_cast<std::int32_t>(step);
  opt::BnbAdemamixCudaScalars s = opt::bnb_ademamix_cuda_scalars(h, t);
  s.alpha = opt::bnb_ademamix_cuda_scalars(h, t - 1).alpha;
  return relaunched(e, {"exp_avg", "exp_avg_slow", "exp_avg_sq"},
                    [&](std::vector<float>& param, const std::vector<float>& grad, std::vector<opt::Moment>& m) {
                      opt::bnb_ademamix_cuda_step(param, grad, m[0], m[1], m[2], s);
                    });
}

constexpr const char* kAlphaLate =
    "the reference with AdEMAMix's alpha scheduler one step late, min((step - 1) alpha / t_alpha, alpha), where "
    "bitsandbytes schedules with the step it is taking";

constexpr const char* kTailNotStepped =
    "the reference with the partial last block not stepped: its parameter, codes and absmax as they were (a loop "
    "over whole blocks only)";

// The whole-step variants by the formats (name prefix) they apply to.
struct StepVariant {
  const char* formats;
  const char* name;
  std::optional<Case> (*run)(const Case& e, const nlohmann::json& p);
  const char* description;
};
constexpr StepVariant kStepVariants[] = {
    {"torchao.adam.codebook", "lerp-weights-swapped", torchao_lerp_swapped,
     "the reference with the lerp weights exchanged, lerp(m, g, beta1) and lerp(v, g^2, beta2), where torchao gives "
     "torch.lerp 1 - beta"},
    {"bnb.adam8bit.cpu", "decay-after-update", adam_decay_after_update,
     "the reference with the weight decay after the update, (p + u)(1 - lr wd) (bitsandbytes' CUDA kernel's order), "
     "where its CPU back end decays first, p (1 - lr wd) + u"},
    {"bnb.ademamix8bit.cpu", "ademamix-alpha-one-step-late", ademamix_alpha_late, kAlphaLate},
    {"bnb.adam8bit.cpu", "tail-not-stepped", tail_not_stepped, kTailNotStepped},
    {"bnb.lion8bit.cpu", "tail-not-stepped", tail_not_stepped, kTailNotStepped},
    {"bnb.momentum8bit.cpu", "tail-not-stepped", tail_not_stepped, kTailNotStepped},
    {"bnb.rmsprop8bit.cpu", "tail-not-stepped", tail_not_stepped, kTailNotStepped},
    {"bnb.adagrad8bit.cpu", "tail-not-stepped", tail_not_stepped, kTailNotStepped},
    {"bnb.ademamix8bit.cpu", "tail-not-stepped", tail_not_stepped, kTailNotStepped},
    {"bnb.ademamix8bit.cpu", "ademamix-beta3-over-t-alpha", ademamix_beta3_over_t_alpha,
     "the reference with AdEMAMix's beta3 scheduler dividing the step by t_alpha, where bitsandbytes divides it by "
     "t_beta3"},
    {"bnb.ademamix8bit.cuda", "ademamix-alpha-one-step-late", ademamix_alpha_late_cuda, kAlphaLate}};

}  // namespace

void add_optimizer_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  for (const StepVariant& v : kStepVariants)
    if (f.name.starts_with(v.formats)) out.push_back({v.name, v.description, v.run});
  const bool cuda = f.name.ends_with(".cuda");
  if (const optimizer_io::BnbOneState* r = optimizer_io::bnb_one_state(f.name))
    for (const RuleVariant& v : kRuleVariants) {
      if (v.rule != r->rule) continue;
      if (cuda && v.cuda) out.push_back(slot_variant(*r, v.name, v.description, v.cuda));
      if (!cuda && v.cpu) out.push_back(one_state_variant(*r, v.name, v.description, v.cpu));
    }
}

}  // namespace lowbit::diagnosis
