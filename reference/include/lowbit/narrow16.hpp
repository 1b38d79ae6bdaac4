#pragma once
// float32 -> bf16 and f16 as the libraries round a float32 result into a 16-bit tensor (bitsandbytes'
// dequantize_blockwise into its input's dtype). Every rule rounds to nearest, ties to even; they
// differ only in NaNs, which docs/formats/bnb-blockwise8.md states per back end.
#include <cstdint>

#include "lowbit/float_bits.hpp"

namespace lowbit {

// Reference: bitsandbytes 0.50 csrc/cpu_ops.h float_to_bf16: (bits + 0x7FFF + lsb) >> 16 on every
// pattern, NaN included (a NaN whose payload lies in the low half can carry into the exponent; its
// dequant never holds one: the CPU absmax ignores NaN, and q * Inf gives x86's default NaN).
inline std::uint16_t bnb_cpu_bf16(float x) {
  const std::uint32_t u = bits_of(x);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// IEEE binary32 -> binary16, round to nearest, ties to even (overflow to +-Inf, gradual underflow); a
// NaN keeps its sign and the payload's top 10 bits with the quiet bit set (0x7FC02000 -> 0x7E01,
// 0x7F800001 -> 0x7E00). Reference: Intel SDM VCVTPS2PH (imm8 rounding 0: nearest even), what
// bitsandbytes' float_to_fp16 runs when built with F16C (its x86 wheels: -mf16c), and what torch
// 2.15's float -> Half copy gave at CPU capabilities AVX2 and default (NaNs included).
inline std::uint16_t f16_round_nearest_even(float x) {
  const std::uint32_t u = bits_of(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u | static_cast<std::uint16_t>((magnitude >> 13) & 0x3FFu);
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;  // 65520 and above (Inf too): rounds to Inf
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent >= -14) {  // a normal f16: drop 13 bits, ties to even (a carry into the exponent is right)
    const std::uint32_t rebased = magnitude - (112u << 23);
    const std::uint32_t rounded = rebased + 0x0FFFu + ((rebased >> 13) & 1u);
    return sign | static_cast<std::uint16_t>(rounded >> 13);
  }
  if (exponent < -25) return sign;  // below half the smallest subnormal 2^-24: zero
  // subnormal f16: the value in units of 2^-24 is mantissa_with_hidden * 2^(exponent + 1), shift right
  const std::uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  const int shift = -exponent - 1;  // 14 .. 24
  const std::uint32_t kept = mantissa >> shift, rest = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1);
  const std::uint32_t rounded = kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
  return sign | static_cast<std::uint16_t>(rounded);
}

}  // namespace lowbit
