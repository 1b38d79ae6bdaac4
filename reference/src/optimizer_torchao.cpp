#include <cmath>
#include <stdexcept>

#include "lowbit/blockwise.hpp"
#include "lowbit/optimizer.hpp"

namespace lowbit::optimizer {

namespace {

}  // namespace

std::vector<float> dequantize(const Moment& m, TorchaoState kind, std::size_t block) {
  return kind == TorchaoState::Fp8 ? blockwise::torchao_fp8_dequantize(m.codes, m.scale, block)
                                   : blockwise::torchao_dequantize(m.codes, m.scale, m.qmap, block);
}

namespace {

void quantize_into(Moment& m, std::span<const float> values, TorchaoState kind, std::size_t block,
                   const fp8::Policy& policy) {
  blockwise::Quantized q = kind == TorchaoState::Fp8 ? blockwise::torchao_fp8_quantize(values, block, policy)
                                                     : blockwise::torchao_quantize(values, m.qmap, block);
  m.codes = std::move(q.codes);
  m.scale = std::move(q.scale);
}

}  // namespace

namespace {

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
  // beta ** step on a float32 tensor is powf (glibc's, as torch's CPU kernel calls it)
  s.bc1 = 1.0f - std::pow(static_cast<float>(h.beta1), step);
  const float bc2 = 1.0f - std::pow(static_cast<float>(h.beta2), step);
  s.sqrt_bc2 = step_ulps(std::sqrt(bc2), sqrt_bc2_ulps);
  return s;
}

AdamElement torchao_adam_element(float p, float g, float m_old, float v_old, const TorchaoAdamScalars& s,
                                        int sqrt_v_ulps) {
  if (s.adamw) p = p - (s.lr * s.wd) * p;  // decoupled, on the pre-update parameter
  else g = g + s.wd * p;                    // L2 on the gradient
  // torch.lerp with |weight| < 0.5: start + weight * (end - start), one fused rounding on the CPU
  const float m = std::fma(s.w1, g - m_old, m_old);
  const float v = std::fma(s.w2, g * g - v_old, v_old);
  const float denom = step_ulps(std::sqrt(v), sqrt_v_ulps) / s.sqrt_bc2 + s.eps;
  return {p - (s.lr * (m / s.bc1)) / denom, m, v};  // the unquantized moments update the parameter
}

void torchao_adam_step(std::span<float> param, std::span<const float> grad, float& step, Moment& exp_avg,
                       Moment& exp_avg_sq, const AdamHyper& h, TorchaoState kind, std::size_t block_size,
                       const fp8::Policy& fp8_policy) {
  if (grad.size() != param.size() || exp_avg.codes.size() != param.size() || exp_avg_sq.codes.size() != param.size())
    throw std::invalid_argument("torchao_adam_step: param, grad and state sizes differ");
  step += 1.0f;  // a float32 counter: stops increasing at 2^24
  const TorchaoAdamScalars s = torchao_adam_scalars(h, step);
  const std::vector<float> m_old = dequantize(exp_avg, kind, block_size);
  const std::vector<float> v_old = dequantize(exp_avg_sq, kind, block_size);
  std::vector<float> m(param.size()), v(param.size());
  for (std::size_t i = 0; i < param.size(); ++i) {
    const AdamElement e = torchao_adam_element(param[i], grad[i], m_old[i], v_old[i], s);
    param[i] = e.param;
    m[i] = e.exp_avg;
    v[i] = e.exp_avg_sq;
  }
  quantize_into(exp_avg, m, kind, block_size, fp8_policy);
  quantize_into(exp_avg_sq, v, kind, block_size, fp8_policy);
}

}  // namespace lowbit::optimizer
