#pragma once
// bitsandbytes' 8-bit block-wise optimizers other than Adam, as its CPU back end computes them: Lion,
// AdEMAMix, SGD with momentum (LARS passes the same rule), RMSprop and Adagrad. LAMB passes Adam's
// rule (optimizer.hpp bnb_adam_cpu_step). One step dequantizes the states (qmap[code] * absmax, block
// 256, partial tail), updates each element as below and requantizes with the CPU lookup-table
// quantizer. docs/formats/bnb-lion8bit.md and its sibling pages state the arithmetic.
#include <cstdint>
#include <functional>
#include <span>

#include "lowbit/optimizer.hpp"

namespace lowbit::optimizer {

// The one-state rules of _optimizer_update_8bit_blockwise_cpu, by the optimizer name it receives.
enum class BnbRule { Lion, Momentum, Rmsprop, Adagrad };

// The Python floats the kernel receives (beta1 is Lion's beta1, SGD's momentum, RMSprop's alpha;
// beta2 is Lion's beta2 and unused by the other three rules).
struct BnbRuleHyper {
  double lr = 1e-4, beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0.0;
  bool fused = true;  // torch's CPU add(alpha) and addcmul: one rounding (AVX2, AVX-512) or two (default)
};

struct BnbRuleScalars {  // the float32 values torch's kernels compute with
  float b1, w1, b2, w2, eps, neg_lr, decay, wd;
  bool decays;  // weight_decay > 0 (Lion's decoupled decay is conditional; the others add wd * p always)
  bool fused;
};
// Reference: bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu, the scalars:
// each Python expression (1 - beta, -lr, 1 - lr * wd) in double, then float32 as ATen takes a scalar.
BnbRuleScalars bnb_rule_scalars(const BnbRuleHyper& h);

struct RuleElement {
  float param, state;  // the new parameter and the unquantized new state
};
// Reference: bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu, one element
// of one rule (step: the optimizer's count, 1 for the first; momentum copies the gradient at step 1).
// sqrt_ulps moves RMSprop's and Adagrad's sqrt(state) by that many ulps (the explainer's candidates of
// torch's faithful CPU sqrt); 0 is the correctly rounded root.
RuleElement bnb_rule_cpu_element(BnbRule rule, float param, float grad, float state, std::int64_t step,
                                 const BnbRuleScalars& s, int sqrt_ulps = 0);

// One step of a one-state rule: state carries bitsandbytes' signed dynamic map ("dynamic", which
// Optimizer1State uses for every rule). The fast path (vectorized, on `threads` threads, one pass over
// memory): the bytes of scalar::bnb_rule_cpu_step for any thread count >= 1 (test_fast_bnb_rules).
void bnb_rule_cpu_step(BnbRule rule, std::span<float> param, std::span<const float> grad, std::int64_t step,
                       Moment& state, const BnbRuleHyper& h, std::size_t block_size = 256, int threads = 1);

// AdEMAMix: two first moments (bitsandbytes' 2-D state1: [0] fast, [1] slow, signed map, one absmax
// row each) and the second moment (state2, unsigned map). t_alpha and t_beta3 are AdEMAMix8bit's
// schedulers (0: off, as Python's None).
struct BnbAdemamixHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, beta3 = 0.9999, alpha = 5.0, eps = 1e-8, weight_decay = 1e-2;
  std::int64_t t_alpha = 0, t_beta3 = 0;
  bool fused = true;
};

struct BnbAdemamixScalars {
  double alpha_t, beta3_t;  // the schedulers' values at this step, in double as Python computes them
  float b1, w1, b2, w2, b3, w3, alpha, c1, c2, eps, neg_lr, decay;
  bool decays, fused;
};
// Reference: bitsandbytes 0.50 optim/ademamix.py AdEMAMix.update_step (alpha_t = min(step * alpha /
// t_alpha, alpha); beta3_t = min(exp(ln b1 ln b3 / ((1 - step/t_beta3) ln b3 + step/t_beta3 ln b1)),
// beta3)) and backends/cpu/ops.py (c1 = 1 - beta1**step, c2 = sqrt(1 - beta2**step) in double).
BnbAdemamixScalars bnb_ademamix_scalars(const BnbAdemamixHyper& h, std::int64_t step);

struct AdemamixElement {
  float param, m1, m2, nu;
};
// Reference: bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu ("ademamix"),
// one element; sqrt_ulps as for bnb_rule_cpu_element (on sqrt(nu)).
AdemamixElement bnb_ademamix_cpu_element(float param, float grad, float m1, float m2, float nu,
                                         const BnbAdemamixScalars& s, int sqrt_ulps = 0);

// The fast path, as bnb_rule_cpu_step's: the bytes of scalar::bnb_ademamix_cpu_step.
void bnb_ademamix_cpu_step(std::span<float> param, std::span<const float> grad, std::int64_t step, Moment& m1,
                           Moment& m2, Moment& nu, const BnbAdemamixHyper& h, std::size_t block_size = 256,
                           int threads = 1);

// ---- CUDA, IEEE model ------------------------------------------------------------------------

struct BnbRuleCudaScalars {  // float32 as the kernel receives them (c_float) and derives them
  float b1, w1, b2, w2, lr, wd, eps, decay;
};
// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise, the scalars:
// 1 - beta as 1.0f - f32(beta) (float32 arithmetic in the kernel, not f32(1 - beta) as on the CPU)
// and Lion's decay factor 1.0f - lr * wd contracted to fma(-lr, wd, 1) (as Adam's model).
BnbRuleCudaScalars bnb_rule_cuda_scalars(const BnbRuleHyper& h);

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise (LION, MOMENTUM,
// RMSPROP, ADAGRAD), one launch on a float32 parameter (block 256; step the int32 the kernel gets),
// modelled with IEEE arithmetic, every multiply-add contracted as nvcc's -fmad=true permits and every
// NaN a result the GPU's canonical 0x7FFFFFFF. Per slot of the block's 256, tail padding included
// (gradient 0, parameter 0, code 128), s0 = q[code] * absmax:
//   Lion: if wd > 0, p = p * decay (before the update); u = lr * sgn(fma(s0, b1, w1 g)) with
//         sgn(NaN) = 0; s = fma(s0, b2, w2 g); p = p - u.
//   Momentum: g' = wd > 0 ? fma(p, wd, g) : g; s = g' at step 1, else fma(s0, b1, g') (no
//         dampening); p = fma(-lr, s, p).
//   RMSprop: g' as momentum; s = fma(s0, b1, w1 (g' g')); p = fma(-lr, g / (sqrt(s) + eps), p).
//   Adagrad: g' as momentum; s = fma(g', g', s0); p as RMSprop. Both divide the gradient as loaded,
//         without the L2 term (the CPU divides the decayed one).
// No NaN/Inf reset (unlike the two-state kernel). New absmax: fmax of |s| over the 256 slots from
// -FLT_MAX (fmax passes over NaN); requantization as Adam's model (bnb_cuda_search of s / absmax, sign
// fix, 0 - 1 wrapping to 255), the non-negative RMSprop and Adagrad states included.
// docs/formats/bnb-lion8bit.md and the rules' pages.
void bnb_rule_cuda_step(BnbRule rule, std::span<float> param, std::span<const float> grad, std::int64_t step,
                        Moment& state, const BnbRuleHyper& h);

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise, one slot's update as
// bnb_rule_cuda_step below states it (p the parameter, g the gradient as loaded, s0 the dequantized state;
// gnorm_scale 1), before the GPU's canonical NaN.
RuleElement bnb_rule_cuda_element(BnbRule rule, float param, float grad, float state, std::int64_t step,
                                  const BnbRuleCudaScalars& s);

// A slot's update for the launch below: bnb_rule_cuda_element, or another rule in the same launch (the
// diagnosis's variants of the kernel).
using BnbRuleCudaSlot =
    std::function<RuleElement(float param, float grad, float state, std::int64_t step, const BnbRuleCudaScalars& s)>;
// bnb_rule_cuda_step's launch (dequantize, the slots, absmax over the 256 slots, requantize) with each
// slot's update from `slot`; the rule's scalars from h.
void bnb_rule_cuda_step(std::span<float> param, std::span<const float> grad, std::int64_t step, Moment& state,
                        const BnbRuleHyper& h, const BnbRuleCudaSlot& slot);

struct BnbAdemamixCudaScalars {  // float32 as the kernel receives them (c_float) and derives them
  float b1, w1, b2, w2, b3, w3, alpha, eps, lr, wd, c1, c2, decay;
};
// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise (ADEMAMIX), the
// scalars: alpha and beta3 as AdEMAMix.update_step schedules them (bnb_ademamix_scalars, double),
// each rounded once to float32; 1 - beta as 1.0f - f32(beta); c1 = 1 - powf(b1, step) and
// c2 = sqrtf(1 - powf(b2, step)) (__powf in the kernel, as Adam's model); decay = fma(-lr, wd, 1).
BnbAdemamixCudaScalars bnb_ademamix_cuda_scalars(const BnbAdemamixHyper& h, std::int32_t step);

// Reference: bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise (ADEMAMIX), one
// launch on a float32 parameter of n elements, n a multiple of 256 (std::invalid_argument otherwise:
// the kernel reads and writes the slow moment's absmax at (n + i) / 256, which for any other n is the
// fast moment's last entry for block 0, written by two thread blocks in no set order). Adam's model
// (bnb_adam_cuda_step) with a third state: per slot with a finite gradient, nu = fma(w2 g, g, nu0 b2),
// m1 = fma(m1_0, b1, w1 g), m2 = fma(m2_0, b3, w3 g) (the slow moment, exp_avg_slow); a NaN or Inf
// gradient resets all three to 0 and leaves p alone. Then p = fma(-lr, fma(alpha, m2, m1 / c1) /
// (sqrt(nu) / c2 + eps), p), and if wd > 0 p = p * decay, after the update (the CPU decays before).
// New absmax of each state over the block's 256 slots from -FLT_MAX; m1 and m2 requantized with the
// signed map and the sign fix, nu with the unsigned map. NaN results are the GPU's 0x7FFFFFFF.
// docs/formats/bnb-ademamix8bit.md.
void bnb_ademamix_cuda_step(std::span<float> param, std::span<const float> grad, std::int32_t step, Moment& m1,
                            Moment& m2, Moment& nu, const BnbAdemamixHyper& h);

// bnb_ademamix_cuda_step's launch with the given scalars (bnb_ademamix_cuda_scalars, or others: the
// diagnosis's variants of the schedulers).
void bnb_ademamix_cuda_step(std::span<float> param, std::span<const float> grad, Moment& m1, Moment& m2, Moment& nu,
                            const BnbAdemamixCudaScalars& s);

// The readable definitions of the two steps above, one element at a time on one thread (the element
// functions in a loop, whole-array dequantize and the quantizer's scalar definition).
namespace scalar {
void bnb_rule_cpu_step(BnbRule rule, std::span<float> param, std::span<const float> grad, std::int64_t step,
                       Moment& state, const BnbRuleHyper& h, std::size_t block_size = 256);
void bnb_ademamix_cpu_step(std::span<float> param, std::span<const float> grad, std::int64_t step, Moment& m1,
                           Moment& m2, Moment& nu, const BnbAdemamixHyper& h, std::size_t block_size = 256);
}  // namespace scalar

}  // namespace lowbit::optimizer
