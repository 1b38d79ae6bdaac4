#pragma once
// Fused optimizer steps, as the official code computes them: one step from (param, grad, states)
// to new (param, states). docs/formats/torchao-adam.md states the arithmetic.
#include <cstdint>
#include <span>
#include <vector>

#include "lowbit/fp8.hpp"

namespace lowbit::optimizer {

struct AdamHyper {
  float lr = 1e-3f;  // torchao keeps lr as a float32 0-dim tensor
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;  // Python floats
  bool adamw = true;  // decoupled weight decay (AdamW) or L2 on the gradient (Adam)
};

// One block-quantized moment: codes (one per element, 4-bit unpacked), per-block scale, and the qmap
// for codebook states (empty for FP8 states).
struct Moment {
  std::vector<std::uint8_t> codes;
  std::vector<float> scale;
  std::vector<float> qmap;
};

enum class TorchaoState { Codebook, Fp8 };

// The per-step scalars of torchao's Adam, float32 as torch holds them.
struct TorchaoAdamScalars {
  float lr, wd, w1, w2, eps, bc1, sqrt_bc2;
  bool adamw;
};
// Reference: torchao 0.18 optim/adam.py single_param_adam, the scalar part: Python floats rounded
// to float32, 1 - beta in double then rounded, bias corrections 1 - powf(beta, step) (glibc powf).
// `step` is the counter after this step's increment. sqrt_bc2_ulps moves sqrt(bc2) off its
// correctly rounded value (0 for the reference; +-1 to explain torch's CPU sqrt).
TorchaoAdamScalars torchao_adam_scalars(const AdamHyper& h, float step, int sqrt_bc2_ulps = 0);

struct AdamElement {
  float param, exp_avg, exp_avg_sq;  // the new parameter and the unquantized new moments
};
// Reference: torchao 0.18 optim/adam.py single_param_adam, one element: weight decay, the two lerps
// as fused multiply-adds, denom = sqrt(v) / sqrt(bc2) + eps, p - lr * (m / bc1) / denom.
// sqrt_v_ulps moves sqrt(v) off its correctly rounded value (0 for the reference).
AdamElement torchao_adam_element(float param, float grad, float exp_avg, float exp_avg_sq,
                                        const TorchaoAdamScalars& s, int sqrt_v_ulps = 0);

// Reference: torchao 0.18 optim/quant_utils.py dequant_with_qmap / subclass_fp8.py dequantize.
std::vector<float> dequantize(const Moment& m, TorchaoState kind, std::size_t block_size);

// Reference: torchao 0.18 optim/adam.py single_param_adam, eager semantics, on OptimState8bit /
// OptimState4bit (Codebook) or OptimStateFp8 (Fp8) moments and a float32 parameter. step is the
// float32 step counter, incremented here first as _AdamBase.step does.
void torchao_adam_step(std::span<float> param, std::span<const float> grad, float& step, Moment& exp_avg,
                       Moment& exp_avg_sq, const AdamHyper& h, TorchaoState kind, std::size_t block_size,
                       const fp8::Policy& fp8_policy = fp8::torch_eager<fp8::E4M3FN>());

// ---- bitsandbytes ------------------------------------------------------------------------------

struct BnbAdamHyper {  // all Python floats in bitsandbytes' CPU kernel
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

struct BnbAdamScalars {
  float b1, w1, b2, w2, eps, c2, step_value, decay;
  bool decays;
};
// Reference: bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu ("adam"),
// the scalars: beta and 1 - beta as float32; c1 = 1 - beta1**step and c2 = sqrt(1 - beta2**step) in
// double; the step value -lr / c1 and the decay factor 1 - lr * wd in double, then float32.
BnbAdamScalars bnb_adam_scalars(const BnbAdamHyper& h, std::int64_t step);

// One element: m = fma(g, 1-b1, m*b1) (add_ with alpha is a fused multiply-add in ATen's CPU kernel),
// v = fma((1-b2)*g, g, v*b2) (addcmul_, contracted by the compiler), the decay before the update,
// p + ((-lr/c1) * m) / (sqrt(v) / c2 + eps) (addcdiv_). sqrt_v_ulps as for torchao.
AdamElement bnb_adam_cpu_element(float param, float grad, float exp_avg, float exp_avg_sq,
                                        const BnbAdamScalars& s, int sqrt_v_ulps = 0);

// Reference: bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu ("adam"):
// dequantize both states (qmap[code] * absmax), update, requantize with the CPU lookup-table
// quantizer (block 256, partial tail). Moments carry the signed / unsigned dynamic maps.
void bnb_adam_cpu_step(std::span<float> param, std::span<const float> grad, std::int64_t step, Moment& exp_avg,
                       Moment& exp_avg_sq, const BnbAdamHyper& h, std::size_t block_size = 256);

}  // namespace lowbit::optimizer
