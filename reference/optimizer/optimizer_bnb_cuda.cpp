// bitsandbytes' 8-bit block-wise Adam as its CUDA kernel computes it, with IEEE arithmetic in place
// of the kernel's fast-math intrinsics. optimizer.hpp states the model; docs/formats/bnb-adam8bit.md
// the differences from the real kernel.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>

#include "lowbit/codebook.hpp"
#include "lowbit/optimizer.hpp"

namespace lowbit::optimizer {

namespace {

constexpr std::size_t kBlock = 256;       // BLOCK_SIZE of the launch (csrc/ops.cu)
constexpr std::uint8_t kPadCode1 = 128;   // LoadChar's default for state1 past the end
constexpr std::uint8_t kPadCode2 = 0;     // and for state2

bool finite(float g) { return !std::isnan(g) && !std::isinf(g); }

}  // namespace

BnbCudaScalars bnb_adam_cuda_scalars(const BnbAdamHyper& h, std::int32_t step) {
  BnbCudaScalars s;
  s.b1 = static_cast<float>(h.beta1);
  s.b2 = static_cast<float>(h.beta2);
  s.w1 = 1.0f - s.b1;  // computed in the kernel from the float32 beta
  s.w2 = 1.0f - s.b2;
  s.eps = static_cast<float>(h.eps);
  s.lr = static_cast<float>(h.lr);
  s.wd = static_cast<float>(h.weight_decay);
  const auto fstep = static_cast<float>(step);  // __powf(float, float): the int step converts
  const float c1 = 1.0f - std::pow(s.b1, fstep);
  s.c2 = std::sqrt(1.0f - std::pow(s.b2, fstep));
  s.step_size = (-s.lr * s.c2) / c1;
  return s;
}

void bnb_adam_cuda_step(std::span<float> param, std::span<const float> grad, std::int32_t step, Moment& m,
                        Moment& v, const BnbAdamHyper& h) {
  const std::size_t n = param.size();
  const std::size_t blocks = (n + kBlock - 1) / kBlock;
  if (grad.size() != n || m.codes.size() != n || v.codes.size() != n)
    throw std::invalid_argument("bnb_adam_cuda_step: param, grad and state sizes differ");
  if (m.scale.size() != blocks || v.scale.size() != blocks)
    throw std::invalid_argument("bnb_adam_cuda_step: absmax arrays need one value per 256 elements");
  if (m.qmap.size() != 256 || v.qmap.size() != 256)
    throw std::invalid_argument("bnb_adam_cuda_step: both states need a 256-entry qmap");
  const BnbCudaScalars s = bnb_adam_cuda_scalars(h, step);
  const float decay = std::fma(-s.lr, s.wd, 1.0f);
  float s1[kBlock], s2[kBlock];
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t begin = b * kBlock, valid = std::min(kBlock, n - begin);
    float absmax1 = -FLT_MAX, absmax2 = -FLT_MAX;  // fmaxf from -FLT_MAX, over all 256 slots
    for (std::size_t j = 0; j < kBlock; ++j) {
      const bool real = j < valid;
      const float g = real ? grad[begin + j] : 0.0f;
      const std::uint8_t c1 = real ? m.codes[begin + j] : kPadCode1, c2 = real ? v.codes[begin + j] : kPadCode2;
      if (finite(g)) {
        s2[j] = std::fma(s.w2 * g, g, v.qmap[c2] * v.scale[b] * s.b2);
        s1[j] = std::fma(m.qmap[c1] * m.scale[b], s.b1, s.w1 * g);
      } else {
        s1[j] = s2[j] = 0.0f;  // a non-finite gradient resets the element's moments
      }
      absmax1 = std::fmax(absmax1, std::fabs(s1[j]));
      absmax2 = std::fmax(absmax2, std::fabs(s2[j]));
    }
    m.scale[b] = absmax1;
    v.scale[b] = absmax2;
    for (std::size_t j = 0; j < valid; ++j) {
      const std::size_t i = begin + j;
      if (finite(grad[i])) {
        param[i] = std::fma(s.step_size, s1[j] / std::fma(s.c2, s.eps, std::sqrt(s2[j])), param[i]);
        if (s.wd > 0.0f) param[i] = param[i] * decay;  // decoupled, after the update
      }
      std::uint8_t c1 = codebook::bnb_cuda_search(s1[j] / absmax1, m.qmap);
      // the stored code must keep s1's sign: step one code toward it (0 - 1 wraps to 255)
      if (std::signbit(m.qmap[c1]) != std::signbit(s1[j])) c1 = s1[j] > 0.0f ? c1 + 1 : c1 - 1;
      m.codes[i] = c1;
      v.codes[i] = codebook::bnb_cuda_search(s2[j] / absmax2, v.qmap);
    }
  }
}

}  // namespace lowbit::optimizer
