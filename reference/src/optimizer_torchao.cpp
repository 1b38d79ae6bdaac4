#include <cmath>
#include <stdexcept>

#include "lowbit/blockwise.hpp"
#include "lowbit/optimizer.hpp"

namespace lowbit::optimizer {

namespace {

std::vector<float> dequantize(const Moment& m, TorchaoState kind, std::size_t block) {
  return kind == TorchaoState::Fp8 ? blockwise::torchao_fp8_dequantize(m.codes, m.scale, block)
                                   : blockwise::torchao_dequantize(m.codes, m.scale, m.qmap, block);
}

void quantize_into(Moment& m, std::span<const float> values, TorchaoState kind, std::size_t block,
                   const fp8::Policy& policy) {
  blockwise::Quantized q = kind == TorchaoState::Fp8 ? blockwise::torchao_fp8_quantize(values, block, policy)
                                                     : blockwise::torchao_quantize(values, m.qmap, block);
  m.codes = std::move(q.codes);
  m.scale = std::move(q.scale);
}

}  // namespace

void torchao_adam_step(std::span<float> param, std::span<const float> grad, float& step, Moment& exp_avg,
                       Moment& exp_avg_sq, const AdamHyper& h, TorchaoState kind, std::size_t block_size,
                       const fp8::Policy& fp8_policy) {
  if (grad.size() != param.size() || exp_avg.codes.size() != param.size() || exp_avg_sq.codes.size() != param.size())
    throw std::invalid_argument("torchao_adam_step: param, grad and state sizes differ");
  // Python floats meet float32 tensors: each is rounded to float32 first; 1 - beta is computed
  // in double, then rounded (0.1 -> 0x3DCCCCCD, 0.001 -> 0x3A83126F).
  const float wd = static_cast<float>(h.weight_decay);
  const float b1 = static_cast<float>(h.beta1), b2 = static_cast<float>(h.beta2);
  const float w1 = static_cast<float>(1.0 - h.beta1), w2 = static_cast<float>(1.0 - h.beta2);
  const float eps = static_cast<float>(h.eps);

  step += 1.0f;  // a float32 counter: stops increasing at 2^24
  // beta ** step on float32 tensors is powf (glibc's, as torch's CPU kernel calls it)
  const float bc1 = 1.0f - std::pow(b1, step);
  const float bc2 = 1.0f - std::pow(b2, step);
  const float sqrt_bc2 = std::sqrt(bc2);

  const std::vector<float> m_old = dequantize(exp_avg, kind, block_size);
  const std::vector<float> v_old = dequantize(exp_avg_sq, kind, block_size);
  std::vector<float> m(param.size()), v(param.size());
  for (std::size_t i = 0; i < param.size(); ++i) {
    float p = param[i], g = grad[i];
    if (h.adamw) p = p - (h.lr * wd) * p;  // decoupled, on the pre-update parameter
    else g = g + wd * p;                    // L2 on the gradient
    // torch.lerp with |weight| < 0.5: start + weight * (end - start), one fused rounding on CPU
    m[i] = std::fma(w1, g - m_old[i], m_old[i]);
    v[i] = std::fma(w2, g * g - v_old[i], v_old[i]);
    const float denom = std::sqrt(v[i]) / sqrt_bc2 + eps;
    p = p - (h.lr * (m[i] / bc1)) / denom;  // the unquantized moments update the parameter
    param[i] = p;
  }
  quantize_into(exp_avg, m, kind, block_size, fp8_policy);
  quantize_into(exp_avg_sq, v, kind, block_size, fp8_policy);
}

}  // namespace lowbit::optimizer
