// torchao's Adam/AdamW step on low-bit and dense states (optimizer.hpp; docs/formats/torchao-adam.md).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "lowbit/bf16_round.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/optimizer.hpp"

namespace lowbit::optimizer {

std::vector<float> dequantize(const Moment& m, TorchaoState kind, std::size_t block) {
  switch (kind) {
    case TorchaoState::Fp8: return blockwise::torchao_fp8_dequantize(m.codes, m.scale, block);
    case TorchaoState::Codebook: return blockwise::torchao_dequantize(m.codes, m.scale, m.qmap, block);
    case TorchaoState::Dense: return m.values;
  }
  throw std::logic_error("dequantize: unknown state kind");
}

namespace {

// The value a tensor of the parameter's dtype holds after copy_(x).
float round_to(ParamDtype dtype, float x) {
  return dtype == ParamDtype::BFloat16 ? widen_bf16(bf16_round_nearest_even(x)) : x;
}

// exp_avg.copy_(values): requantize a low-bit state with a fresh scale, or store a dense one.
void store(Moment& m, std::span<const float> values, const TorchaoAdamOptions& o) {
  if (o.kind == TorchaoState::Dense) {
    m.values.resize(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) m.values[i] = round_to(o.param_dtype, values[i]);
    return;
  }
  blockwise::Quantized q = o.kind == TorchaoState::Fp8
                               ? blockwise::torchao_fp8_quantize(values, o.block_size, o.fp8_policy)
                               : blockwise::torchao_quantize(values, m.qmap, o.block_size);
  m.codes = std::move(q.codes);
  m.scale = std::move(q.scale);
}

std::size_t state_size(const Moment& m, TorchaoState kind) {
  return kind == TorchaoState::Dense ? m.values.size() : m.codes.size();
}

// x moved by k binary32 ulps (k in -1..1 here), toward +inf for k > 0.
float step_ulps(float x, int k) {
  const float toward = k > 0 ? INFINITY : -INFINITY;
  for (int i = 0; i < std::abs(k); ++i) x = std::nextafter(x, toward);
  return x;
}

}  // namespace

TorchaoAdamScalars torchao_adam_scalars(const AdamHyper& h, float step, int sqrt_bc2_ulps) {
  TorchaoAdamScalars s;
  // Python floats meet float32 tensors: each is rounded to float32 first; 1 - beta is computed
  // in double, then rounded (0.1 -> 0x3DCCCCCD, 0.001 -> 0x3A83126F).
  s.lr = h.lr;
  s.wd = static_cast<float>(h.weight_decay);
  s.w1 = static_cast<float>(1.0 - h.beta1);
  s.w2 = static_cast<float>(1.0 - h.beta2);
  s.eps = static_cast<float>(h.eps);
  s.adamw = h.adamw;
  s.fused = h.fused;
  // beta ** step on a float32 tensor is powf (glibc's, as torch's CPU kernel calls it)
  s.bc1 = 1.0f - std::pow(static_cast<float>(h.beta1), step);
  const float bc2 = 1.0f - std::pow(static_cast<float>(h.beta2), step);
  s.sqrt_bc2 = step_ulps(std::sqrt(bc2), sqrt_bc2_ulps);
  return s;
}

AdamElement torchao_adam_element(float p, float g, float m_old, float v_old, const TorchaoAdamScalars& s,
                                 int sqrt_v_ulps, const float* max_old) {
  if (s.adamw) p = p - (s.lr * s.wd) * p;  // decoupled, on the pre-update parameter
  else g = g + s.wd * p;                    // L2 on the gradient
  // torch.lerp with |weight| < 0.5: start + weight * (end - start), one fused rounding in the
  // vectorized CPU kernels (AVX2, AVX-512), two in the scalar ones (capability default)
  const auto lerp = [&s](float start, float end, float weight) {
    return s.fused ? std::fma(weight, end - start, start) : start + weight * (end - start);
  };
  const float m = lerp(m_old, g, s.w1);
  const float v = lerp(v_old, g * g, s.w2);
  // torch.maximum propagates a NaN from either side
  const float v_max = max_old ? (std::isnan(*max_old) || std::isnan(v) ? NAN : std::max(*max_old, v)) : v;
  const float denom = step_ulps(std::sqrt(v_max), sqrt_v_ulps) / s.sqrt_bc2 + s.eps;
  return {p - (s.lr * (m / s.bc1)) / denom, m, v, v_max};  // the unquantized moments update the parameter
}

void torchao_adam_step(std::span<float> param, std::span<const float> grad, float& step, Moment& exp_avg,
                       Moment& exp_avg_sq, Moment* max_exp_avg_sq, const AdamHyper& h,
                       const TorchaoAdamOptions& o) {
  const std::size_t n = param.size();
  if (grad.size() != n || state_size(exp_avg, o.kind) != n || state_size(exp_avg_sq, o.kind) != n ||
      (max_exp_avg_sq && state_size(*max_exp_avg_sq, o.kind) != n))
    throw std::invalid_argument("torchao_adam_step: param, grad and state sizes differ");
  const bool stochastic = !o.stochastic_round_random.empty();
  if (stochastic && (o.param_dtype != ParamDtype::BFloat16 || o.stochastic_round_random.size() != n))
    throw std::invalid_argument("torchao_adam_step: stochastic rounding needs a bf16 parameter and one draw per element");
  step += 1.0f;  // a float32 counter: stops increasing at 2^24
  const TorchaoAdamScalars s = torchao_adam_scalars(h, step);
  const std::vector<float> m_old = dequantize(exp_avg, o.kind, o.block_size);
  const std::vector<float> v_old = dequantize(exp_avg_sq, o.kind, o.block_size);
  const std::vector<float> max_old = max_exp_avg_sq ? dequantize(*max_exp_avg_sq, o.kind, o.block_size)
                                                    : std::vector<float>{};
  std::vector<float> m(n), v(n), v_max(max_exp_avg_sq ? n : 0);
  for (std::size_t i = 0; i < n; ++i) {
    const AdamElement e =
        torchao_adam_element(param[i], grad[i], m_old[i], v_old[i], s, 0, max_exp_avg_sq ? &max_old[i] : nullptr);
    param[i] = stochastic ? widen_bf16(bf16_stochastic_round(e.param, o.stochastic_round_random[i]))
                          : round_to(o.param_dtype, e.param);
    m[i] = e.exp_avg;
    v[i] = e.exp_avg_sq;
    if (max_exp_avg_sq) v_max[i] = e.max_exp_avg_sq;
  }
  store(exp_avg, m, o);
  store(exp_avg_sq, v, o);
  if (max_exp_avg_sq) store(*max_exp_avg_sq, v_max, o);
}

}  // namespace lowbit::optimizer
