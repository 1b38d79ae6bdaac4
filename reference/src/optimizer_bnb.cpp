#include <cmath>
#include <stdexcept>

#include "lowbit/blockwise.hpp"
#include "lowbit/optimizer.hpp"

namespace lowbit::optimizer {

BnbAdamScalars bnb_adam_scalars(const BnbAdamHyper& h, std::int64_t step) {
  BnbAdamScalars s;
  s.b1 = static_cast<float>(h.beta1);
  s.w1 = static_cast<float>(1.0 - h.beta1);
  s.b2 = static_cast<float>(h.beta2);
  s.w2 = static_cast<float>(1.0 - h.beta2);
  s.eps = static_cast<float>(h.eps);
  const double c1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));  // Python float ** int
  s.c2 = static_cast<float>(std::sqrt(1.0 - std::pow(h.beta2, static_cast<double>(step))));
  s.step_value = static_cast<float>(-h.lr / c1);
  s.decays = h.weight_decay > 0.0;
  s.decay = static_cast<float>(1.0 - h.lr * h.weight_decay);
  s.fused = h.fused;
  return s;
}

AdamElement bnb_adam_cpu_element(float p, float g, float m_old, float v_old, const BnbAdamScalars& s,
                                        int sqrt_v_ulps) {
  // mul_(beta1).add_(grad, alpha=1-beta1) and mul_(beta2).addcmul_(grad, grad, value=1-beta2):
  // fused in the vectorized kernels, self + alpha*other and self + (value*t1)*t2 in the scalar ones
  const float m = s.fused ? std::fma(g, s.w1, m_old * s.b1) : m_old * s.b1 + g * s.w1;
  const float v = s.fused ? std::fma(s.w2 * g, g, v_old * s.b2) : v_old * s.b2 + (s.w2 * g) * g;
  float root = std::sqrt(v);
  for (int k = 0; k < std::abs(sqrt_v_ulps); ++k) root = std::nextafter(root, sqrt_v_ulps > 0 ? INFINITY : -INFINITY);
  const float denom = root / s.c2 + s.eps;
  if (s.decays) p = p * s.decay;  // before the update, unlike the CUDA kernel
  return {p + (s.step_value * m) / denom, m, v};
}

void bnb_adam_cpu_step(std::span<float> param, std::span<const float> grad, std::int64_t step, Moment& exp_avg,
                       Moment& exp_avg_sq, const BnbAdamHyper& h, std::size_t block_size) {
  if (grad.size() != param.size() || exp_avg.codes.size() != param.size() || exp_avg_sq.codes.size() != param.size())
    throw std::invalid_argument("bnb_adam_cpu_step: param, grad and state sizes differ");
  const BnbAdamScalars s = bnb_adam_scalars(h, step);
  const auto m_old = blockwise::bnb_dequantize(exp_avg.codes, exp_avg.scale, exp_avg.qmap, block_size);
  const auto v_old = blockwise::bnb_dequantize(exp_avg_sq.codes, exp_avg_sq.scale, exp_avg_sq.qmap, block_size);
  std::vector<float> m(param.size()), v(param.size());
  for (std::size_t i = 0; i < param.size(); ++i) {
    const AdamElement e = bnb_adam_cpu_element(param[i], grad[i] * 1.0f, m_old[i], v_old[i], s);
    param[i] = e.param;
    m[i] = e.exp_avg;
    v[i] = e.exp_avg_sq;
  }
  auto requantize = [block_size](Moment& moment, const std::vector<float>& values) {
    blockwise::Quantized q = blockwise::bnb_quantize(values, moment.qmap, block_size, blockwise::BnbBackend::CpuLut);
    moment.codes = std::move(q.codes);
    moment.scale = std::move(q.scale);
  };
  requantize(exp_avg, m);
  requantize(exp_avg_sq, v);
}

}  // namespace lowbit::optimizer
