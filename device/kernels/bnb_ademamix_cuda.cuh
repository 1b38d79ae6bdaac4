#pragma once
// The arithmetic of our CUDA kernel of bitsandbytes' 8-bit block-wise AdEMAMix (bnb.ademamix8bit.cuda),
// one definition for the device (bnb_ademamix_plugin.cu) and the host twin (bnb_ademamix_host_twin.cpp):
// the reference's IEEE model of bitsandbytes' two-state kernel (reference/optimizer/optimizer_bnb_cuda.cpp
// bnb_ademamix_cuda_step, docs/formats/bnb-ademamix8bit.md), operation for operation, through
// ieee_ops.cuh's round-to-nearest operations. The step's scalars are computed on the host on both
// sides (as bitsandbytes' Python and launch compute them), the per-slot arithmetic on the side's
// processor. The code search and the sign fix are the one-state kernel's (bnb_one_state_cuda.cuh).
#include <math.h>

#include "bnb_one_state_cuda.cuh"

namespace lowbit_kernels::bnb_ademamix {

using bnb_one_state::code;       // signed states: search, then the sign fix
using bnb_one_state::gpu_nan;    // every NaN result 0x7FFFFFFF
using bnb_one_state::kBlock;     // 256, BLOCKSIZE_2STATE
using bnb_one_state::kNegFltMaxBits;
using bnb_one_state::search;     // the unsigned state: the search alone

struct Hyper {  // the params as written (Python floats and ints)
  double lr, beta1, beta2, beta3, alpha, eps, weight_decay;
  int64_t t_alpha, t_beta3;
};

struct Scalars {
  float b1, w1, b2, w2, b3, w3, alpha, eps, lr, wd, c1, c2, decay;
};

// Host only. AdEMAMix.update_step's schedulers in double (alpha_t = min(step alpha / t_alpha, alpha);
// beta3_t = min(exp(ln b1 ln b3 / ((1 - step/t_beta3) ln b3 + step/t_beta3 ln b1)), beta3)), each
// rounded once to float32 (c_float); then the kernel's float32 1 - beta, c1 = 1 - powf(b1, step),
// c2 = sqrtf(1 - powf(b2, step)) (IEEE stand-ins for __powf) and the decay factor fma(-lr, wd, 1).
// Built with LOWBIT_KERNELS_MUTANT_ADEMAMIX_ALPHA_LATE it is a mutant: the alpha scheduler one step
// late, (step - 1) alpha / t_alpha.
inline Scalars scalars(const Hyper& h, int32_t step) {
  const double t = static_cast<double>(step);
#ifdef LOWBIT_KERNELS_MUTANT_ADEMAMIX_ALPHA_LATE
  const double t_for_alpha = t - 1.0;
#else
  const double t_for_alpha = t;
#endif
  double alpha_t = h.alpha, beta3_t = h.beta3;
  if (h.t_alpha != 0) alpha_t = fmin(t_for_alpha * h.alpha / static_cast<double>(h.t_alpha), h.alpha);
  if (h.t_beta3 != 0) {
    const double ln1 = log(h.beta1), ln3 = log(h.beta3), scale = t / static_cast<double>(h.t_beta3);
    beta3_t = fmin(exp((ln1 * ln3) / (((1.0 - scale) * ln3) + (scale * ln1))), h.beta3);
  }
  Scalars s;
  s.b1 = static_cast<float>(h.beta1);
  s.b2 = static_cast<float>(h.beta2);
  s.b3 = static_cast<float>(beta3_t);
  s.w1 = add_rn(1.0f, -s.b1);
  s.w2 = add_rn(1.0f, -s.b2);
  s.w3 = add_rn(1.0f, -s.b3);
  s.alpha = static_cast<float>(alpha_t);
  s.eps = static_cast<float>(h.eps);
  s.lr = static_cast<float>(h.lr);
  s.wd = static_cast<float>(h.weight_decay);
  const float fstep = static_cast<float>(step);
  s.c1 = add_rn(1.0f, -powf(s.b1, fstep));
  s.c2 = sqrt_rn(add_rn(1.0f, -powf(s.b2, fstep)));
  s.decay = fma_rn(-s.lr, s.wd, 1.0f);
  return s;
}

struct Moments {
  float m1, m2, nu;  // the fast and slow first moments, the second moment
};

LOWBIT_HOST_DEVICE inline bool finite(float g) { return (bits_of(g) & 0x7F800000u) != 0x7F800000u; }

// One slot's new moments from the dequantized old ones: zero for a NaN or Inf gradient.
LOWBIT_HOST_DEVICE inline Moments moments(float g, const Moments& old, const Scalars& s) {
  if (!finite(g)) return {0.0f, 0.0f, 0.0f};
  return {gpu_nan(fma_rn(old.m1, s.b1, mul_rn(s.w1, g))), gpu_nan(fma_rn(old.m2, s.b3, mul_rn(s.w3, g))),
          gpu_nan(fma_rn(mul_rn(s.w2, g), g, mul_rn(old.nu, s.b2)))};
}

// The new parameter: the update, then the decay (after it); p untouched for a NaN or Inf gradient.
LOWBIT_HOST_DEVICE inline float parameter(float p, float g, const Moments& m, const Scalars& s) {
  if (!finite(g)) return p;
  const float numerator = fma_rn(s.alpha, m.m2, div_rn(m.m1, s.c1));
  const float denominator = add_rn(div_rn(sqrt_rn(m.nu), s.c2), s.eps);
  float next = gpu_nan(fma_rn(-s.lr, div_rn(numerator, denominator), p));
  if (s.wd > 0.0f) next = mul_rn(next, s.decay);
  return next;
}

}  // namespace lowbit_kernels::bnb_ademamix
