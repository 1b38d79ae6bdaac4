#pragma once
// COAT's FP8 AdamW step per element and per group, for our CUDA kernels (coat_plugin.cu) and their
// host twin (coat_host_twin.cpp): formats coat.optim.origin.e4m3 and coat.optim.expand.e4m3. Each
// function is one step of the reference (reference/coat/coat_optimizer.cpp adamw_step,
// origin/expand_quantize_group, origin/expand_dequantize, expand_prequantized) in the same binary32
// operations: explicit __fdiv_rn / __fmul_rn / __fadd_rn / __fsqrt_rn on the device and __fmaf_rn
// exactly where the reference calls std::fma (where nvcc and ptxas fuse COAT's kernels); the rest of
// the device code is built with --fmad=false, no fast-math, subnormals kept.
// docs/formats/coat-optimizer.md states the arithmetic.
//
// powf and log2f are COAT's own: CUDA's libdevice functions on the device, the reference's models of
// them on the host (coat_libdevice.cuh says why). NaNs follow the GPU: every NaN the arithmetic makes
// is the canonical +NaN 0x7FFFFFFF, so the functions canonicalize where the reference does (on the
// device this changes nothing; on the host it replaces x86's 0xFFC00000).
#include "coat_libdevice.cuh"
#include "ieee_ops.cuh"
#include "e4m3.cuh"

namespace lowbit_kernels::coat {

constexpr unsigned kGroup = 128;                    // qgroup_size: the launchers assert it
constexpr float kFp8Max = 448.0f;                   // fp8MaxVal
constexpr float kRatioUpperBound = 100352.0f;       // 448 * 448 / 2
constexpr float kBlockFillMin = 1e9f;               // the block-level min of lanes 4-31 of warp 0
constexpr uint32_t kFltMaxBits = 0x7F7FFFFFu;       // the min of a padding thread (idx >= n)
constexpr double kOriginMin = 1e-20, kExpandMin = 1e-30;  // QUANT_MIN_VAL of each kernel, a double

LOWBIT_HOST_DEVICE inline float canonical(float x) { return is_nan(x) ? float_of(lowbit::cuda::kCanonicalNan) : x; }

// f32(double(x) + c): the kernels add QUANT_MIN_VAL in double, then round once (cvt.rn.f32.f64).
LOWBIT_HOST_DEVICE inline float add_in_double(float x, double c) {
#ifdef __CUDA_ARCH__
  return __double2float_rn(__dadd_rn(static_cast<double>(x), c));
#else
  return static_cast<float>(static_cast<double>(x) + c);
#endif
}

// sg = -1 when the sign bit is set (-0 too): the kernel's 1 - 2 * signbit(x).
LOWBIT_HOST_DEVICE inline float sign_of(float x) { return (bits_of(x) & 0x80000000u) ? -1.0f : 1.0f; }

// float(__nv_fp8_e4m3): exact; the NaN code becomes the canonical NaN (every use multiplies it).
LOWBIT_HOST_DEVICE inline float decode_e4m3(uint8_t c) { return decode_e4m3_or(c, float_of(lowbit::cuda::kCanonicalNan)); }

// static_cast<__nv_fp8_e4m3>(x): cvt.rn.satfinite.e4m3x2.f32, nearest even, overflow and +-Inf to
// +-448, NaN to 0x7F (fp8::cuda_satfinite()).
LOWBIT_HOST_DEVICE inline uint8_t e4m3_satfinite(float x) { return encode_e4m3(x, Fp8Cast{true, false}); }

// The hyperparameters as the kernel receives them (C++ floats) and the step's scalars.
struct Hyper {
  float lr, beta1, beta2, eps, weight_decay;
  int expand_min;
};
struct StepScalars {
  float w1, w2, c1, c2;
};

// Reference: COAT 80ec99f fp8_adamw_cuda_kernel.cu lines 44-48 (expand .cu 52-58): 1 - beta in float,
// c1 = 1 - powf(b1, step), c2 = sqrtf(1 - powf(b2, step)); step is the int the optimizer passes.
LOWBIT_HOST_DEVICE inline StepScalars step_scalars(const Hyper& h, float step) {
  return {add_rn(1.0f, -h.beta1), add_rn(1.0f, -h.beta2), add_rn(1.0f, -powf_coat(h.beta1, step)),
          sqrt_rn(add_rn(1.0f, -powf_coat(h.beta2, step)))};
}

// Reference: COAT 80ec99f fp8_adamw_cuda_kernel.cu line 40: float(code) * scale.
LOWBIT_HOST_DEVICE inline float origin_dequantize(uint8_t code, float scale) { return canonical(mul_rn(decode_e4m3(code), scale)); }

// Reference: COAT 80ec99f fp8_adamw_expand_cuda_kernel.cu lines 44-49: d = float(code) * s, then
// (sg(d) * powf(|d|, 1/k)) * c; the second moment has no sign handling: powf(d, 1/k) * c.
LOWBIT_HOST_DEVICE inline float expand_dequantize(uint8_t code, float scale, float expand, float centre, bool second) {
  const float d = canonical(mul_rn(decode_e4m3(code), scale));
  const float inverse_k = div_rn(1.0f, expand);
  if (second) return canonical(mul_rn(powf_coat(d, inverse_k), centre));
  return canonical(mul_rn(canonical(mul_rn(sign_of(d), powf_coat(abs_of(d), inverse_k))), centre));
}

// The unquantized new moments of one element; the new parameter goes to *param_next.
struct Moments {
  float m, v;
};
// Reference: COAT 80ec99f fp8_adamw_cuda_kernel.cu lines 44-53 (expand .cu 52-64), with nvcc's and
// ptxas's fusions: m = fma(m0, b1, w1 g), v = fma(v0, b2, g (w2 g)), denom = ((sqrt(v) / c2) + eps) c1,
// u = fma(p, wd, m / denom), p - lr u = fma(-u, lr, p).
LOWBIT_HOST_DEVICE inline Moments adamw_update(float m0, float v0, float g, float p, const Hyper& h, const StepScalars& s,
                                               float* param_next) {
  const float m = canonical(fma_rn(m0, h.beta1, mul_rn(s.w1, g)));
  const float v = canonical(fma_rn(v0, h.beta2, mul_rn(g, mul_rn(s.w2, g))));
  const float denom = mul_rn(add_rn(div_rn(sqrt_rn(v), s.c2), h.eps), s.c1);
  const float u = fma_rn(p, h.weight_decay, div_rn(m, denom));
  *param_next = canonical(fma_rn(-u, h.lr, p));
  return {m, v};
}

// ---- the group reductions: how one lane takes a value shuffled down to it ---------------------------

// fmax(acc, |received|): NaN ignored, order-free.
LOWBIT_HOST_DEVICE inline float combine_max(float acc, float received) { return fmaxf(acc, abs_of(received)); }
// The expansion kernel's minimum: fminf(acc, |received|) only when |received| > 0 (setp.leu skips an
// incoming zero or NaN); the lane's own value is never tested, so the shuffle order matters.
LOWBIT_HOST_DEVICE inline float combine_min(float acc, float received) {
  const float r = abs_of(received);
  return r > 0.0f ? fminf(acc, r) : acc;
}

// ---- per group: the new statistics and each element's code -----------------------------------------

// Reference: COAT 80ec99f fp8_adamw_cuda_kernel.cu lines 101-124: s = f32(double(max) + 1e-20) / 448
// (the kernel's shared-memory race modelled as one addition, as the reference does).
LOWBIT_HOST_DEVICE inline float origin_scale(float group_max) { return div_rn(add_in_double(group_max, kOriginMin), kFp8Max); }
LOWBIT_HOST_DEVICE inline uint8_t origin_code(float x, float scale) { return e4m3_satfinite(div_rn(x, scale)); }

struct ExpandGroup {
  float scale, expand, centre;
};

// Reference: COAT 80ec99f fp8_adamw_expand_cuda_kernel.cu lines 154-180: A, B = max, min + 1e-30 (in
// double), R = A / B, c = sqrt(A) sqrt(B), k = floor(log2f(100352) / log2f(R) * E) / E,
// s = powf(A / c, k) / 448.
LOWBIT_HOST_DEVICE inline ExpandGroup expand_group(float group_max, float group_min, int expand_min) {
  const float a = add_in_double(group_max, kExpandMin), b = add_in_double(group_min, kExpandMin);
  const float ratio = div_rn(a, b);
  ExpandGroup q;
#ifdef LOWBIT_KERNELS_MUTANT_CENTRE_ONE_SQRT
  q.centre = sqrt_rn(mul_rn(a, b));  // the mutant: sqrt(A B), the pre-fix kernels' centre
#else
  q.centre = mul_rn(sqrt_rn(a), sqrt_rn(b));
#endif
  const float e = static_cast<float>(expand_min);
  q.expand = canonical(div_rn(floorf(mul_rn(div_rn(log2f_coat(kRatioUpperBound), log2f_coat(ratio)), e)), e));
  q.scale = canonical(div_rn(powf_coat(canonical(div_rn(a, q.centre)), q.expand), kFp8Max));
  return q;
}

// Reference: COAT 80ec99f fp8_adamw_expand_cuda_kernel.cu lines 174-186: e4m3(t / s) with
// t = sg(x) powf(|x| / c, k) (second moment: powf(x / c, k)).
LOWBIT_HOST_DEVICE inline uint8_t expand_code(float x, const ExpandGroup& q, bool second) {
  const float t = second ? powf_coat(canonical(div_rn(x, q.centre)), q.expand)
                         : mul_rn(sign_of(x), powf_coat(canonical(div_rn(abs_of(x), q.centre)), q.expand));
  return e4m3_satfinite(canonical(div_rn(canonical(t), q.scale)));
}

}  // namespace lowbit_kernels::coat
