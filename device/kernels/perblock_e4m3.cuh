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
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define PERBLOCK_HD __host__ __device__
#else
#define PERBLOCK_HD
#endif

namespace perblock {

constexpr float kE4M3Max = 448.0f;           // largest finite E4M3FN value
constexpr uint8_t kNanCode = 0x7F;           // CUDA's NaN code: S.1111.111 with the sign dropped
constexpr uint8_t kMaxFiniteCode = 0x7E;     // 448
constexpr uint32_t kX86DefaultNan = 0xFFC00000u;  // what SSE's mulss makes of 0 * Inf

PERBLOCK_HD inline uint32_t bits_of(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
#endif
}

PERBLOCK_HD inline float float_of(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
#endif
}

PERBLOCK_HD inline bool is_nan(float x) { return (bits_of(x) & 0x7FFFFFFFu) > 0x7F800000u; }

// IEEE binary32 division and multiplication, round to nearest even.
PERBLOCK_HD inline float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

PERBLOCK_HD inline float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// The reciprocal, rounded (only the mutant uses it: x * (1 / s) is not x / s).
PERBLOCK_HD inline float rcp_rn(float b) {
#ifdef __CUDA_ARCH__
  return __frcp_rn(b);
#else
  return 1.0f / b;
#endif
}

// One step of the block's amax: std::max(amax, |v|) is (amax < |v|) ? |v| : amax, so a NaN never wins.
// Also merges two partial maxima (both non-negative, never NaN), in any order: max is exact.
PERBLOCK_HD inline float amax_step(float amax, float v) {
  const float a = float_of(bits_of(v) & 0x7FFFFFFFu);
  return amax < a ? a : amax;
}

// The block's scale: amax / 448, rounded to nearest even.
PERBLOCK_HD inline float scale_of(float amax) { return div_rn(amax, kE4M3Max); }

// float32 -> E4M3FN, round to nearest even, satfinite, CUDA's NaN (fp8::encode_nearest_even<E4M3FN>
// under fp8::cuda_satfinite(), reference/include/lowbit/fp8.hpp, step by step).
PERBLOCK_HD inline uint8_t encode_e4m3_satfinite(float x) {
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
PERBLOCK_HD inline float decode_e4m3(uint8_t c) {
  const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  const uint32_t magnitude = c & 0x7Fu;
  if (magnitude == 0x7Fu) return float_of(sign | 0x7FC00000u);
  const uint32_t exponent = magnitude >> 3, mantissa = magnitude & 7u;
  if (exponent == 0) return float_of(sign | bits_of(static_cast<float>(mantissa) * 0.001953125f));  // m * 2^-9, exact
  return float_of(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

// One element's code under its block's scale (0: the all-zero block, where a NaN element is 0x7F).
PERBLOCK_HD inline uint8_t code_of(float x, float scale) {
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
PERBLOCK_HD inline float dequant_of(uint8_t code, float scale) {
  const float d = decode_e4m3(code);
  if (is_nan(d)) return d;
  const float p = mul_rn(d, scale);
  return is_nan(p) ? float_of(kX86DefaultNan) : p;
}

}  // namespace perblock
