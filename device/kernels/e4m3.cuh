#pragma once
// E4M3FN codes for our CUDA kernels and their host twins (device/kernels/): the one float32 -> E4M3FN
// cast (round to nearest even, with the overflow and NaN policy of the implementation a kernel
// stands for) and the one exact E4M3FN -> float32 decode, each NaN code given the bits its caller's
// implementation makes of it. Used by the torchao, per-block and COAT kernels.
#include "ieee_ops.cuh"

namespace lowbit_kernels {

// How the torch that ran the state casts to float8_e4m3fn (the format's params): saturate (overflow
// "satfinite", torch >= 2.13) or NaN (overflow "nan" or "inf": E4M3FN has no Inf); a NaN input's code
// keeps its sign (nan_encoding "torch" or "ml_dtypes": 0x7F | sign) or drops it ("cuda": 0x7F).
struct Fp8Cast {
  bool saturate;
  bool nan_keeps_sign;
};

// float32 -> E4M3FN, round to nearest even (fp8::encode_nearest_even<E4M3FN> with the cast's policy,
// reference/include/lowbit/fp8.hpp, step by step). A NaN made by overflow always has the input's sign.
LOWBIT_HOST_DEVICE inline uint8_t encode_e4m3(float x, Fp8Cast cast) {
  const uint32_t u = bits_of(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7FFFFFFFu;
  const uint8_t overflow = static_cast<uint8_t>(sign | (cast.saturate ? 0x7Eu : 0x7Fu));
  if (a > 0x7F800000u) return static_cast<uint8_t>(0x7Fu | (cast.nan_keeps_sign ? sign : 0u));
  if (a == 0x7F800000u) return overflow;
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
  if (magnitude > 0x7Eu) return overflow;
  return static_cast<uint8_t>(sign | magnitude);
}

// E4M3FN -> float32, exact (the subnormal m * 2^-9 is exact too); a NaN code (S.1111.111) gives `nan`,
// whose bits differ by implementation (the reference's quiet NaN, torch's widening, a GPU's canonical NaN).
LOWBIT_HOST_DEVICE inline float decode_e4m3_or(uint8_t c, float nan) {
  const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  const uint32_t magnitude = c & 0x7Fu;
  if (magnitude == 0x7Fu) return nan;
  const uint32_t exponent = magnitude >> 3, mantissa = magnitude & 7u;
  if (exponent == 0) return float_of(sign | bits_of(mul_rn(static_cast<float>(mantissa), 0.001953125f)));
  return float_of(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

}  // namespace lowbit_kernels
