#pragma once
// Fused optimizer steps, as the official code computes them: one step from (param, grad, states)
// to new (param, states). docs/formats/torchao-adam.md states the arithmetic.
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "lowbit/fp8.hpp"

namespace lowbit::optimizer {

struct AdamHyper {
  float lr = 1e-3f;  // torchao keeps lr as a float32 0-dim tensor
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;  // Python floats
  bool adamw = true;  // decoupled weight decay (AdamW) or L2 on the gradient (Adam)
  // torch's CPU kernels of lerp, add(alpha) and addcmul: one fused rounding where the CPU capability
  // is AVX2 or AVX-512 (vectorized, built with FMA), two with ATEN_CPU_CAPABILITY=default (scalar)
  bool fused = true;
};

// One optimizer moment. Quantized states: codes (one per element, 4-bit unpacked), per-block scale,
// and the qmap for codebook states (empty for FP8). Dense states (torchao's fallback for small
// tensors): `values`, in the parameter's dtype (bf16 values are held widened to float).
struct Moment {
  std::vector<std::uint8_t> codes;
  std::vector<float> scale;
  std::vector<float> qmap;
  std::vector<float> values;
};

// Dense: torchao's _new_buffer keeps a plain zeros_like(param) state when numel < 4096 or numel is
// not a multiple of the block size.
enum class TorchaoState { Codebook, Fp8, Dense };
enum class ParamDtype { Float32, BFloat16 };

// How torchao's step is set up besides the hyperparameters.
struct TorchaoAdamOptions {
  TorchaoState kind = TorchaoState::Codebook;
  std::size_t block_size = 256;  // ignored for dense states
  fp8::Policy fp8_policy = fp8::torch_eager<fp8::E4M3FN>();
  ParamDtype param_dtype = ParamDtype::Float32;  // a bf16 parameter (and dense state) is rounded on write
  // torch's float32 -> bf16 copy_ of that write: vectorized (CPU capability AVX2, AVX-512: a NaN becomes
  // 0xFFFF) or scalar (capability default: c10's conversion, a NaN becomes 0x7FC0); bf16_round.hpp
  bool vectorized_copies = true;
  // bf16_stochastic_round: torch.randint(0, 2^16) draws, one per element; empty means round to
  // nearest even. Only for bf16 parameters.
  std::span<const std::int32_t> stochastic_round_random = {};
  // Threads for the step (>= 1): consecutive ranges of blocks (of elements for dense states), one per
  // thread; the bytes do not depend on it. The scalar definition (scalar::torchao_adam_step) ignores it.
  int threads = 1;
};

// The per-step scalars of torchao's Adam, float32 as torch holds them.
struct TorchaoAdamScalars {
  float lr, wd, w1, w2, eps, bc1, sqrt_bc2;
  bool adamw;
  bool fused = true;  // AdamHyper::fused
};
// Reference: torchao 0.18 optim/adam.py single_param_adam, the scalar part: Python floats rounded
// to float32, 1 - beta in double then rounded, bias corrections 1 - powf(beta, step) (glibc powf).
// `step` is the counter after this step's increment. sqrt_bc2_ulps moves sqrt(bc2) off its
// correctly rounded value (0 for the reference; +-1 to explain torch's CPU sqrt).
TorchaoAdamScalars torchao_adam_scalars(const AdamHyper& h, float step, int sqrt_bc2_ulps = 0);

struct AdamElement {
  float param, exp_avg, exp_avg_sq;  // the new parameter and the unquantized new moments
  float max_exp_avg_sq = 0.0f;       // AMSGrad only: maximum(old max, new exp_avg_sq), NaN propagating
};
// Reference: torch 2.15 aten/src/ATen/native/cpu/BinaryOpsKernel.cpp add_kernel (sub: alpha -1), as
// single_param_adam's p_f32 - u meets it: p - u, but a NaN u as it is, also over a NaN p (C++'s p - u
// would keep p's NaN; docs/formats/torchao-adam.md "NaN payloads").
inline float torch_sub(float p, float u) { return std::isnan(u) ? u : p - u; }

// Reference: torchao 0.18 optim/adam.py single_param_adam, one element: weight decay, the two lerps
// as fused multiply-adds, AMSGrad's running maximum when max_old is given, denom = sqrt(v or max) /
// sqrt(bc2) + eps, p - lr * (m / bc1) / denom (torch_sub; float32, before the write-back rounding).
// sqrt_v_ulps moves sqrt(v) off its correctly rounded value (0 for the reference).
AdamElement torchao_adam_element(float param, float grad, float exp_avg, float exp_avg_sq,
                                 const TorchaoAdamScalars& s, int sqrt_v_ulps = 0,
                                 const float* max_exp_avg_sq = nullptr);

// Reference: torchao 0.18 optim/quant_utils.py dequant_with_qmap / subclass_fp8.py dequantize; a
// dense state's values as they are.
std::vector<float> dequantize(const Moment& m, TorchaoState kind, std::size_t block_size);

// Reference: torchao 0.18 optim/adam.py single_param_adam, eager semantics, on OptimState8bit /
// OptimState4bit (Codebook), OptimStateFp8 (Fp8) or plain (Dense) moments. step is the float32 step
// counter, incremented here first as _AdamBase.step does. max_exp_avg_sq is AMSGrad's state (null
// without AMSGrad; quantized with the unsigned map like exp_avg_sq). A bf16 parameter is passed
// widened to float and comes back holding bf16 values.
// The fast path (optimizer_torchao.cpp, optimizer_bnb.cpp): the block-wise fast paths (blockwise.hpp *_into) and
// the vectorized element update on options.threads threads; the bytes of scalar::torchao_adam_step
// for any input and thread count (conformance/tests/test_fast_steps.cpp).
void torchao_adam_step(std::span<float> param, std::span<const float> grad, float& step, Moment& exp_avg,
                       Moment& exp_avg_sq, Moment* max_exp_avg_sq, const AdamHyper& h,
                       const TorchaoAdamOptions& options);

// ---- bitsandbytes ------------------------------------------------------------------------------

struct BnbAdamHyper {  // all Python floats in bitsandbytes' CPU kernel
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool fused = true;  // as AdamHyper::fused: add(alpha) and addcmul in torch's CPU kernels
};

struct BnbAdamScalars {
  float b1, w1, b2, w2, eps, c2, step_value, decay;
  bool decays;
  bool fused = true;
};
// Reference: bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu ("adam"),
// the scalars: beta and 1 - beta as float32; c1 = 1 - beta1**step and c2 = sqrt(1 - beta2**step) in
// double; the step value -lr / c1 and the decay factor 1 - lr * wd in double, then float32.
BnbAdamScalars bnb_adam_scalars(const BnbAdamHyper& h, std::int64_t step);

// One element: m = fma(g, 1-b1, m*b1) (add_ with alpha is a fused multiply-add in ATen's CPU kernel),
// v = fma((1-b2)*g, g, v*b2) (addcmul_, contracted by the compiler); without s.fused (torch's scalar
// kernels) m = m*b1 + g*(1-b1) and v = v*b2 + ((1-b2)*g)*g, each rounded twice; the decay before the update,
// p + ((-lr/c1) * m) / (sqrt(v) / c2 + eps) (addcdiv_). sqrt_v_ulps as for torchao.
AdamElement bnb_adam_cpu_element(float param, float grad, float exp_avg, float exp_avg_sq,
                                        const BnbAdamScalars& s, int sqrt_v_ulps = 0);

// Reference: bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu ("adam"):
// dequantize both states (qmap[code] * absmax), update, requantize with the CPU lookup-table
// quantizer (block 256, partial tail). Moments carry the signed / unsigned dynamic maps.
// The fast path, as torchao_adam_step's: the bytes of scalar::bnb_adam_cpu_step for any thread count (>= 1).
void bnb_adam_cpu_step(std::span<float> param, std::span<const float> grad, std::int64_t step, Moment& exp_avg,
                       Moment& exp_avg_sq, const BnbAdamHyper& h, std::size_t block_size = 256, int threads = 1);

// The readable definitions of the two CPU steps above, one element at a time on one thread (the
// element functions above in a loop, whole-array dequantize and quantize), against which the fast
// paths are tested.
namespace scalar {
void torchao_adam_step(std::span<float> param, std::span<const float> grad, float& step, Moment& exp_avg,
                       Moment& exp_avg_sq, Moment* max_exp_avg_sq, const AdamHyper& h,
                       const TorchaoAdamOptions& options);
void bnb_adam_cpu_step(std::span<float> param, std::span<const float> grad, std::int64_t step, Moment& exp_avg,
                       Moment& exp_avg_sq, const BnbAdamHyper& h, std::size_t block_size = 256);
}  // namespace scalar

// ---- bitsandbytes CUDA, IEEE model ----------------------------------------------------------

struct BnbCudaScalars {  // float32 as the kernel receives them (c_float) and derives them per launch
  float b1, w1, b2, w2, eps, lr, wd, c2, step_size;
};
// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise (ADAM), the
// per-launch scalars with IEEE stand-ins for the fast-math intrinsics: 1 - beta as 1.0f - f32(beta)
// (0x3DCCCCD0 for 0.9, not f32(0.1)); c1 = 1 - powf(beta1, step) and c2 = sqrtf(1 - powf(beta2, step))
// (__powf in the kernel); step_size = (-lr * c2) / c1 (__fdividef in the kernel).
BnbCudaScalars bnb_adam_cuda_scalars(const BnbAdamHyper& h, std::int32_t step);

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise (ADAM), one
// launch on a float32 parameter, modelled with IEEE arithmetic and every multiply-add contracted
// as nvcc's default -fmad=true does: s2 = fma((1-b2) g, g, s2 b2), s1 = fma(s1, b1, (1-b1) g),
// p = fma(step_size, s1 / fma(c2, eps, sqrt(s2)), p), then p = p * fma(-lr, wd, 1) (decay after the
// update). A NaN or Inf gradient resets both moments to 0 and leaves p alone. The new absmax takes
// every one of the block's 256 slots, tail padding included (state1 code 128, state2 code 0, grad
// 0); requantization divides by it (bnb_cuda_search) and fixes state1's sign, wrapping 0 - 1 to 255.
// Block 256. docs/formats/bnb-adam8bit.md lists what the real kernel's fast math changes.
void bnb_adam_cuda_step(std::span<float> param, std::span<const float> grad, std::int32_t step, Moment& exp_avg,
                        Moment& exp_avg_sq, const BnbAdamHyper& h);

}  // namespace lowbit::optimizer
