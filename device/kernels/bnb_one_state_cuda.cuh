#pragma once
// The arithmetic of our CUDA kernel of bitsandbytes' 8-bit block-wise one-state rules (bnb.lion8bit.cuda,
// bnb.momentum8bit.cuda, bnb.rmsprop8bit.cuda, bnb.adagrad8bit.cuda), one definition for the device (bnb_one_state_plugin.cu) and the host twin
// (bnb_one_state_host_twin.cpp): the reference's IEEE model of bitsandbytes' one-state kernel
// (reference/optimizer/optimizer_bnb_rules_cuda.cpp; docs/formats/bnb-lion8bit.md and the rules'
// pages), operation for operation, through ieee_ops.cuh's round-to-nearest operations. Every NaN a
// result is the GPU's canonical 0x7FFFFFFF on both sides (the reference's too).
#include "ieee_ops.cuh"

namespace lowbit_kernels::bnb_one_state {

constexpr unsigned kBlock = 256;          // the kernel's block (BLOCKSIZE_1STATE)
constexpr uint8_t kPadCode = 128;         // state1's code for a slot past the end
constexpr uint32_t kGpuNan = 0x7FFFFFFFu;  // the GPU's canonical NaN
constexpr uint32_t kNegFltMaxBits = 0xFF7FFFFFu;  // -FLT_MAX, where the block's absmax starts

// The kernel's OPTIMIZER template argument, as far as our kernels model it.
enum class Rule : int { Lion, Momentum, Rmsprop, Adagrad };

struct Scalars {
  float b1, w1, b2, w2, lr, wd, eps, decay;
};

// The float32 scalars from the params (each a double rounded once, as c_float does): 1 - beta in
// float32, Lion's decay factor 1 - lr * wd contracted.
LOWBIT_HOST_DEVICE inline Scalars scalars(double lr, double beta1, double beta2, double weight_decay, double eps) {
  Scalars s;
  s.b1 = static_cast<float>(beta1);
  s.b2 = static_cast<float>(beta2);
  s.w1 = add_rn(1.0f, -s.b1);
  s.w2 = add_rn(1.0f, -s.b2);
  s.lr = static_cast<float>(lr);
  s.wd = static_cast<float>(weight_decay);
  s.eps = static_cast<float>(eps);
  s.decay = fma_rn(-s.lr, s.wd, 1.0f);
  return s;
}

LOWBIT_HOST_DEVICE inline float gpu_nan(float x) { return is_nan(x) ? float_of(kGpuNan) : x; }

// bitsandbytes' sgn: (0 < x) - (x < 0) as an int, 0 for NaN.
LOWBIT_HOST_DEVICE inline float sgn(float x) { return static_cast<float>(static_cast<int>(0.0f < x) - static_cast<int>(x < 0.0f)); }

struct Slot {
  float param, state;
};

// Lion's slot. Built with LOWBIT_KERNELS_MUTANT_LION_DECAY_AFTER it is a mutant: the decay after the
// update (where Adam's CUDA kernel puts it), which verify must catch.
LOWBIT_HOST_DEVICE inline Slot lion_slot(float p, float g, float s0, const Scalars& s) {
#ifndef LOWBIT_KERNELS_MUTANT_LION_DECAY_AFTER
  if (s.wd > 0.0f) p = mul_rn(p, s.decay);  // decoupled, before the update
#endif
  const float u = mul_rn(s.lr, sgn(fma_rn(s0, s.b1, mul_rn(s.w1, g))));
  float next = add_rn(p, -u);
#ifdef LOWBIT_KERNELS_MUTANT_LION_DECAY_AFTER
  if (s.wd > 0.0f) next = mul_rn(next, s.decay);
#endif
  return {next, fma_rn(s0, s.b2, mul_rn(s.w2, g))};
}

// SGD with momentum's slot: the L2 term only when wd > 0, the buffer copied at step 1. Built with
// LOWBIT_KERNELS_MUTANT_MOMENTUM_DAMPENING it is a mutant: torch's dampening (1 - momentum) on the
// gradient from step 2, which the kernel does not apply.
LOWBIT_HOST_DEVICE inline Slot momentum_slot(float p, float g, float s0, int64_t step, const Scalars& s) {
  if (s.wd > 0.0f) g = fma_rn(p, s.wd, g);
#ifdef LOWBIT_KERNELS_MUTANT_MOMENTUM_DAMPENING
  g = step == 1 ? g : mul_rn(s.w1, g);
#endif
  const float state = step == 1 ? g : fma_rn(s0, s.b1, g);
  return {fma_rn(-s.lr, state, p), state};
}

// RMSprop's and Adagrad's slot: the L2 term only when wd > 0, and only in the state (RMSprop's EMA of
// g'^2, Adagrad's sum); the parameter divides the gradient as loaded by sqrt(s) + eps. Built with
// LOWBIT_KERNELS_MUTANT_RMSPROP_EPS_INSIDE it is a mutant: eps under the root, sqrt(s + eps); with
// LOWBIT_KERNELS_MUTANT_ADAGRAD_DECAYED_NUMERATOR Adagrad divides g' (the CPU back end's rule).
LOWBIT_HOST_DEVICE inline Slot root_slot(Rule rule, float p, float g, float s0, const Scalars& s) {
  const float gd = s.wd > 0.0f ? fma_rn(p, s.wd, g) : g;
  const float state = rule == Rule::Rmsprop ? fma_rn(s0, s.b1, mul_rn(s.w1, mul_rn(gd, gd))) : fma_rn(gd, gd, s0);
#ifdef LOWBIT_KERNELS_MUTANT_RMSPROP_EPS_INSIDE
  const float denom = sqrt_rn(add_rn(state, s.eps));
#else
  const float denom = add_rn(sqrt_rn(state), s.eps);
#endif
#ifdef LOWBIT_KERNELS_MUTANT_ADAGRAD_DECAYED_NUMERATOR
  const float numerator = rule == Rule::Adagrad ? gd : g;
#else
  const float numerator = g;
#endif
  return {fma_rn(-s.lr, div_rn(numerator, denom), p), state};
}

// One slot: p the parameter (0 past the end), g the gradient (0 past the end), s0 the dequantized
// state, step the optimizer's step (momentum reads it).
LOWBIT_HOST_DEVICE inline Slot slot(Rule rule, float p, float g, float s0, int64_t step, const Scalars& s) {
  const Slot out = rule == Rule::Lion       ? lion_slot(p, g, s0, s)
                   : rule == Rule::Momentum ? momentum_slot(p, g, s0, step, s)
                                            : root_slot(rule, p, g, s0, s);
  return {gpu_nan(out.param), gpu_nan(out.state)};
}

// bitsandbytes' quantize_2D as the reference's codebook::bnb_cuda_search models it: the bracket
// q[i] <= y < q[i+1], the midpoint (q[i] + q[i+1]) * 0.5, ties to the even index, NaN to 0.
LOWBIT_HOST_DEVICE inline uint8_t search(float y, const float* q) {
  if (is_nan(y) || y < q[0]) return 0;
  if (y >= q[255]) return 255;
  unsigned lo = 0, hi = 255;  // q[lo] <= y < q[hi]
  while (hi - lo > 1) {
    const unsigned mid = (lo + hi) / 2;
    if (q[mid] <= y) lo = mid;
    else hi = mid;
  }
  const float midpoint = mul_rn(add_rn(q[lo], q[lo + 1]), 0.5f);
  if (y < midpoint) return static_cast<uint8_t>(lo);
  if (y > midpoint) return static_cast<uint8_t>(lo + 1);
  return static_cast<uint8_t>(lo % 2 == 0 ? lo : lo + 1);
}

// The stored code of a new state: the search of state / absmax, then one code toward the state's sign
// when the code's value has the other sign (0 - 1 wraps to 255).
LOWBIT_HOST_DEVICE inline uint8_t code(float state, float absmax, const float* q) {
  uint8_t c = search(div_rn(state, absmax), q);
  if ((bits_of(q[c]) >> 31) != (bits_of(state) >> 31)) c = state > 0.0f ? static_cast<uint8_t>(c + 1) : static_cast<uint8_t>(c - 1);
  return c;
}

}  // namespace lowbit_kernels::bnb_one_state
