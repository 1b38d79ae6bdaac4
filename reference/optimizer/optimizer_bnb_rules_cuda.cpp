// bitsandbytes' 8-bit block-wise one-state rules (Lion, SGD with momentum, RMSprop, Adagrad) as its
// one-state CUDA kernel computes them, with IEEE arithmetic in place of the kernel's fast-math
// intrinsics. optimizer_bnb_rules.hpp states the model; docs/formats/bnb-lion8bit.md and its sibling
// pages the differences from the real kernel and from the CPU.
#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <stdexcept>

#include "lowbit/codebook.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"

namespace lowbit::optimizer {

namespace {

constexpr std::size_t kBlock = 256;     // BLOCKSIZE_1STATE of the launch (csrc/ops.cu)
constexpr std::uint8_t kPadCode = 128;  // LoadChar's default for state1 past the end

// The GPU's arithmetic returns one NaN, 0x7FFFFFFF, whatever NaN went in (x86 keeps a payload and
// its sign); the sign fix reads the new state's sign bit, so the model fixes it.
float gpu_nan(float x) { return std::isnan(x) ? std::bit_cast<float>(0x7FFFFFFFu) : x; }

// Reference: bitsandbytes 0.50 csrc/kernels.cu sgn: (T(0) < val) - (val < T(0)), an int; 0 for NaN.
float sgn(float x) { return static_cast<float>(static_cast<int>(0.0f < x) - static_cast<int>(x < 0.0f)); }

}  // namespace

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise, one slot's update.
RuleElement bnb_rule_cuda_element(BnbRule rule, float p, float g, float s0, std::int64_t step,
                                  const BnbRuleCudaScalars& s) {
  const bool decays = s.wd > 0.0f;
  switch (rule) {
    case BnbRule::Lion: {
      if (decays) p = p * s.decay;  // decoupled, before the update
      const float u = s.lr * sgn(std::fma(s0, s.b1, s.w1 * g));
      return {p - u, std::fma(s0, s.b2, s.w2 * g)};
    }
    case BnbRule::Momentum: {
      const float gd = decays ? std::fma(p, s.wd, g) : g;  // L2, added to the gradient
      const float state = step == 1 ? gd : std::fma(s0, s.b1, gd);
      return {std::fma(-s.lr, state, p), state};
    }
    case BnbRule::Rmsprop:
    case BnbRule::Adagrad: {
      const float gd = decays ? std::fma(p, s.wd, g) : g;
      const float state = rule == BnbRule::Rmsprop ? std::fma(s0, s.b1, s.w1 * (gd * gd)) : std::fma(gd, gd, s0);
      // the parameter divides the gradient as loaded (g), not the decayed one (gd)
      return {std::fma(-s.lr, g / (std::sqrt(state) + s.eps), p), state};
    }
  }
  throw std::invalid_argument("bnb_rule_cuda_step: unknown rule");
}

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise, its scalars.
BnbRuleCudaScalars bnb_rule_cuda_scalars(const BnbRuleHyper& h) {
  BnbRuleCudaScalars s;
  s.b1 = static_cast<float>(h.beta1);
  s.b2 = static_cast<float>(h.beta2);
  s.w1 = 1.0f - s.b1;
  s.w2 = 1.0f - s.b2;
  s.lr = static_cast<float>(h.lr);
  s.wd = static_cast<float>(h.weight_decay);
  s.eps = static_cast<float>(h.eps);
  s.decay = std::fma(-s.lr, s.wd, 1.0f);
  return s;
}

namespace {

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise, one launch with slot(p, g, s0).
template <class Slot>
void launch(std::span<float> param, std::span<const float> grad, Moment& m, const Slot& slot) {
  const std::size_t n = param.size();
  const std::size_t blocks = (n + kBlock - 1) / kBlock;
  if (grad.size() != n || m.codes.size() != n) throw std::invalid_argument("bnb_rule_cuda_step: param, grad and state sizes differ");
  if (m.scale.size() != blocks) throw std::invalid_argument("bnb_rule_cuda_step: the absmax needs one value per 256 elements");
  if (m.qmap.size() != 256) throw std::invalid_argument("bnb_rule_cuda_step: the state needs a 256-entry qmap");
  float state[kBlock], next[kBlock];
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t begin = b * kBlock, valid = std::min(kBlock, n - begin);
    float absmax = -FLT_MAX;  // fmaxf from -FLT_MAX over all 256 slots
    for (std::size_t j = 0; j < kBlock; ++j) {
      const bool real = j < valid;
      const float s0 = m.qmap[real ? m.codes[begin + j] : kPadCode] * m.scale[b];
      const RuleElement out = slot(real ? param[begin + j] : 0.0f, real ? grad[begin + j] : 0.0f, s0);
      state[j] = gpu_nan(out.state);
      next[j] = gpu_nan(out.param);
      absmax = std::fmax(absmax, std::fabs(state[j]));
    }
    m.scale[b] = absmax;
    for (std::size_t j = 0; j < valid; ++j) {
      param[begin + j] = next[j];
      std::uint8_t c = codebook::bnb_cuda_search(state[j] / absmax, m.qmap);
      // the stored code must keep the state's sign: one code toward it (0 - 1 wraps to 255)
      if (std::signbit(m.qmap[c]) != std::signbit(state[j])) c = state[j] > 0.0f ? c + 1 : c - 1;
      m.codes[begin + j] = c;
    }
  }
}

}  // namespace

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise, one launch.
void bnb_rule_cuda_step(BnbRule rule, std::span<float> param, std::span<const float> grad, std::int64_t step,
                        Moment& m, const BnbRuleHyper& h) {
  const BnbRuleCudaScalars s = bnb_rule_cuda_scalars(h);
  launch(param, grad, m, [&](float p, float g, float s0) { return bnb_rule_cuda_element(rule, p, g, s0, step, s); });
}

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise, one launch, another slot.
void bnb_rule_cuda_step(std::span<float> param, std::span<const float> grad, std::int64_t step, Moment& m,
                        const BnbRuleHyper& h, const BnbRuleCudaSlot& slot) {
  const BnbRuleCudaScalars s = bnb_rule_cuda_scalars(h);
  launch(param, grad, m, [&](float p, float g, float s0) { return slot(p, g, s0, step, s); });
}

}  // namespace lowbit::optimizer
