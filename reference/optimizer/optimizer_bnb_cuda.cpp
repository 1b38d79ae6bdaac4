// bitsandbytes' 8-bit block-wise Adam and AdEMAMix as its two-state CUDA kernel computes them, with
// IEEE arithmetic in place of the kernel's fast-math intrinsics. optimizer.hpp and
// optimizer_bnb_rules.hpp state the models; docs/formats/bnb-adam8bit.md and bnb-ademamix8bit.md the
// differences from the real kernel.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>

#include <bit>

#include "lowbit/codebook.hpp"
#include "lowbit/optimizer.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"

namespace lowbit::optimizer {

namespace {

constexpr std::size_t kBlock = 256;       // BLOCK_SIZE of the launch (csrc/ops.cu)
constexpr std::uint8_t kPadCode1 = 128;   // LoadChar's default for state1 past the end
constexpr std::uint8_t kPadCode2 = 0;     // and for state2

bool finite(float g) { return !std::isnan(g) && !std::isinf(g); }

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise, the first
// moment's update (s1 * beta1 + (1 - beta1) * g, contracted; AdEMAMix's slow moment with beta3).
float first_moment(float s0, float beta, float weight, float g) { return std::fma(s0, beta, weight * g); }

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise, the second
// moment's update (s2 * beta2 + (1 - beta2) * g * g, contracted).
float second_moment(float s0, float beta, float weight, float g) { return std::fma(weight * g, g, s0 * beta); }

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise, a signed state's
// code: quantize_2D<1> of s / absmax, then one code toward s's sign where the code's value has the
// other sign (0 - 1 wraps to 255).
std::uint8_t signed_code(float s, float absmax, const std::vector<float>& qmap) {
  std::uint8_t c = codebook::bnb_cuda_search(s / absmax, qmap);
  if (std::signbit(qmap[c]) != std::signbit(s)) c = s > 0.0f ? c + 1 : c - 1;
  return c;
}

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
        s2[j] = second_moment(v.qmap[c2] * v.scale[b], s.b2, s.w2, g);
        s1[j] = first_moment(m.qmap[c1] * m.scale[b], s.b1, s.w1, g);
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
      m.codes[i] = signed_code(s1[j], absmax1, m.qmap);  // the stored code keeps s1's sign
      v.codes[i] = codebook::bnb_cuda_search(s2[j] / absmax2, v.qmap);
    }
  }
}

// ---- AdEMAMix ---------------------------------------------------------------------------------

namespace {

// The GPU's arithmetic returns one NaN, 0x7FFFFFFF (x86 keeps a payload): a parameter or moment made
// NaN (an Inf moment over an Inf one) is written as the GPU writes it.
float gpu_nan(float x) { return std::isnan(x) ? std::bit_cast<float>(0x7FFFFFFFu) : x; }

}  // namespace

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise (ADEMAMIX), its scalars.
BnbAdemamixCudaScalars bnb_ademamix_cuda_scalars(const BnbAdemamixHyper& h, std::int32_t step) {
  const BnbAdemamixScalars scheduled = bnb_ademamix_scalars(h, step);  // AdEMAMix.update_step's alpha and beta3
  BnbAdemamixCudaScalars s;
  s.b1 = static_cast<float>(h.beta1);
  s.b2 = static_cast<float>(h.beta2);
  s.b3 = static_cast<float>(scheduled.beta3_t);
  s.w1 = 1.0f - s.b1;  // computed in the kernel from the float32 betas
  s.w2 = 1.0f - s.b2;
  s.w3 = 1.0f - s.b3;
  s.alpha = static_cast<float>(scheduled.alpha_t);
  s.eps = static_cast<float>(h.eps);
  s.lr = static_cast<float>(h.lr);
  s.wd = static_cast<float>(h.weight_decay);
  const auto fstep = static_cast<float>(step);  // __powf(float, float): the int step converts
  s.c1 = 1.0f - std::pow(s.b1, fstep);
  s.c2 = std::sqrt(1.0f - std::pow(s.b2, fstep));
  s.decay = std::fma(-s.lr, s.wd, 1.0f);
  return s;
}

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise (ADEMAMIX), one launch.
void bnb_ademamix_cuda_step(std::span<float> param, std::span<const float> grad, std::int32_t step, Moment& m1,
                            Moment& m2, Moment& nu, const BnbAdemamixHyper& h) {
  bnb_ademamix_cuda_step(param, grad, m1, m2, nu, bnb_ademamix_cuda_scalars(h, step));
}

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise (ADEMAMIX), one launch, given scalars.
void bnb_ademamix_cuda_step(std::span<float> param, std::span<const float> grad, Moment& m1, Moment& m2, Moment& nu,
                            const BnbAdemamixCudaScalars& s) {
  const std::size_t n = param.size();
  const std::size_t blocks = n / kBlock;
  if (n % kBlock != 0)
    throw std::invalid_argument("bnb_ademamix_cuda_step: the kernel's slow-moment absmax index (n + i) / 256 races "
                                "unless 256 divides the element count");
  if (grad.size() != n || m1.codes.size() != n || m2.codes.size() != n || nu.codes.size() != n)
    throw std::invalid_argument("bnb_ademamix_cuda_step: param, grad and state sizes differ");
  if (m1.scale.size() != blocks || m2.scale.size() != blocks || nu.scale.size() != blocks)
    throw std::invalid_argument("bnb_ademamix_cuda_step: absmax arrays need one value per 256 elements");
  if (m1.qmap.size() != 256 || m2.qmap.size() != 256 || nu.qmap.size() != 256)
    throw std::invalid_argument("bnb_ademamix_cuda_step: the states need 256-entry qmaps");
  float s1[kBlock], s2[kBlock], s3[kBlock];
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t begin = b * kBlock;
    float absmax1 = -FLT_MAX, absmax2 = -FLT_MAX, absmax3 = -FLT_MAX;  // fmaxf from -FLT_MAX
    for (std::size_t j = 0; j < kBlock; ++j) {
      const std::size_t i = begin + j;
      const float g = grad[i];
      if (finite(g)) {
        s2[j] = gpu_nan(second_moment(nu.qmap[nu.codes[i]] * nu.scale[b], s.b2, s.w2, g));
        s1[j] = gpu_nan(first_moment(m1.qmap[m1.codes[i]] * m1.scale[b], s.b1, s.w1, g));
        s3[j] = gpu_nan(first_moment(m2.qmap[m2.codes[i]] * m2.scale[b], s.b3, s.w3, g));  // the slow moment
      } else {
        s1[j] = s2[j] = s3[j] = 0.0f;  // a non-finite gradient resets the element's three moments
      }
      absmax1 = std::fmax(absmax1, std::fabs(s1[j]));
      absmax2 = std::fmax(absmax2, std::fabs(s2[j]));
      absmax3 = std::fmax(absmax3, std::fabs(s3[j]));
    }
    m1.scale[b] = absmax1;
    nu.scale[b] = absmax2;
    m2.scale[b] = absmax3;
    for (std::size_t j = 0; j < kBlock; ++j) {
      const std::size_t i = begin + j;
      if (finite(grad[i])) {
        const float numerator = std::fma(s.alpha, s3[j], s1[j] / s.c1);
        const float denominator = std::sqrt(s2[j]) / s.c2 + s.eps;
        param[i] = gpu_nan(std::fma(-s.lr, numerator / denominator, param[i]));
        if (s.wd > 0.0f) param[i] = param[i] * s.decay;  // decoupled, after the update
      }
      m1.codes[i] = signed_code(s1[j], absmax1, m1.qmap);
      nu.codes[i] = codebook::bnb_cuda_search(s2[j] / absmax2, nu.qmap);
      m2.codes[i] = signed_code(s3[j], absmax3, m2.qmap);
    }
  }
}

}  // namespace lowbit::optimizer
