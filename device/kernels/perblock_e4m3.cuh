#pragma once
// Per-block E4M3 (format fp8.perblock.e4m3, docs/formats/fp8.md "Per-block E4M3") written out step by
// step for the CUDA plugin (cuda_perblock_plugin.cu) and for its host twin (cuda_perblock_host_twin.cpp,
// the same functions compiled for the CPU, which verify checks on every machine). Every operation is
// the reference's (reference/src/blockwise.cpp fp8_perblock_quantize / _dequantize) in IEEE binary32:
// __fdiv_rn / __fmul_rn on the device, / and * on the host (built with -ffp-contract=off), nothing
// fused, no fast-math, subnormals kept (nvcc's default -ftz=false).
//
// The E4M3 cast is written out rather than taken from cuda_fp8.h: the reference is CUDA's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) as cuda_fp8.hpp's host path computes it (NaN ->
// 0x7F with the sign dropped, Inf -> +-448), and on sm_89+ the intrinsic is the cvt.rn.satfinite
// instruction instead, whose NaN sign this project has not measured. Written out, the device and the
// host twin run the same integer steps, and the twin is checked against the reference on the CPU.
#include "ieee_ops.cuh"

namespace perblock {

// The binary32 primitives are the block-wise kernels' (ieee_ops.cuh): one definition of each.
using lowbit_kernels::amax_step;  // std::max(amax, |v|): a NaN never wins; merges partial maxima in any order
using lowbit_kernels::bits_of;
using lowbit_kernels::div_rn;
using lowbit_kernels::float_of;
using lowbit_kernels::is_nan;
using lowbit_kernels::kX86DefaultNan;
using lowbit_kernels::mul_rn;

constexpr float kE4M3Max = 448.0f;           // largest finite E4M3FN value
constexpr uint8_t kNanCode = 0x7F;           // CUDA's NaN code: S.1111.111 with the sign dropped
constexpr uint8_t kMaxFiniteCode = 0x7E;     // 448

// The reciprocal, rounded (only the mutant uses it: x * (1 / s) is not x / s).
LOWBIT_HOST_DEVICE inline float rcp_rn(float b) {
#ifdef __CUDA_ARCH__
  return __frcp_rn(b);
#else
  return 1.0f / b;
#endif
}

// The block's scale: amax / 448, rounded to nearest even.
LOWBIT_HOST_DEVICE inline float scale_of(float amax) { return div_rn(amax, kE4M3Max); }

// float32 -> E4M3FN, round to nearest even, satfinite, CUDA's NaN (fp8::encode_nearest_even<E4M3FN>
// under fp8::cuda_satfinite(), reference/include/lowbit/fp8.hpp, step by step).
LOWBIT_HOST_DEVICE inline uint8_t encode_e4m3_satfinite(float x) {
  const uint32_t u = bits_of(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return kNanCode;
  if (a == 0x7F800000u) return static_cast<uint8_t>(sign | kMaxFiniteCode);
  uint32_t code;
  uint64_t rem, half;
  const uint32_t exponent = a >> 23;
  if (exponent >= 121u) {  // normal in E4M3 (binary32 exponent field of 2^-6): re-bias, keep 3 mantissa bits
    const uint32_t rebased = a - (120u << 23);
    code = rebased >> 20;
    rem = rebased & 0xFFFFFu;
    half = 0x80000u;
  } else {  // subnormal in E4M3: significand * 2^(e - 150) in units of 2^-9
    const uint64_t significand = exponent ? ((a & 0x7FFFFFu) | 0x800000u) : a;
    const int shift = 141 - static_cast<int>(exponent ? exponent : 1u);  // >= 21
    if (shift >= 64) return sign;  // far below half the smallest subnormal: +-0
    code = static_cast<uint32_t>(significand >> shift);
    rem = significand & ((uint64_t{1} << shift) - 1);
    half = uint64_t{1} << (shift - 1);
  }
  const uint32_t magnitude = code + ((rem > half || (rem == half && (code & 1u))) ? 1u : 0u);
  if (magnitude > kMaxFiniteCode) return static_cast<uint8_t>(sign | kMaxFiniteCode);
  return static_cast<uint8_t>(sign | magnitude);
}

// E4M3FN -> float32, exact; NaN as the reference decodes it (0x7FC00000 with the code's sign).
LOWBIT_HOST_DEVICE inline float decode_e4m3(uint8_t c) {
  const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  const uint32_t magnitude = c & 0x7Fu;
  if (magnitude == 0x7Fu) return float_of(sign | 0x7FC00000u);
  const uint32_t exponent = magnitude >> 3, mantissa = magnitude & 7u;
  if (exponent == 0) return float_of(sign | bits_of(static_cast<float>(mantissa) * 0.001953125f));  // m * 2^-9, exact
  return float_of(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

// One element's code under its block's scale (0: the all-zero block, where a NaN element is 0x7F).
LOWBIT_HOST_DEVICE inline uint8_t code_of(float x, float scale) {
  if (scale == 0.0f) return is_nan(x) ? kNanCode : uint8_t{0};
#ifdef PERBLOCK_MUTANT_RECIPROCAL
  return encode_e4m3_satfinite(mul_rn(x, rcp_rn(scale)));  // the bug: times the reciprocal
#else
  return encode_e4m3_satfinite(div_rn(x, scale));
#endif
}

// decode(code) * scale with the NaN the reference gets on x86 (SSE): a NaN operand comes through as
// it is (the scale is never NaN), and 0 * Inf (a block holding an Inf) is SSE's default NaN 0xFFC00000;
// a GPU would give its canonical 0x7FFFFFFF for both.
LOWBIT_HOST_DEVICE inline float dequant_of(uint8_t code, float scale) {
  const float d = decode_e4m3(code);
  if (is_nan(d)) return d;
  const float p = mul_rn(d, scale);
  return is_nan(p) ? float_of(kX86DefaultNan) : p;
}

}  // namespace perblock
