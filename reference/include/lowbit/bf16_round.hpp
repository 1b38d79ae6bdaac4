#pragma once
// float32 -> bfloat16 as torch's CPU kernels round a parameter on write-back, and torchao's
// stochastic rounding. docs/formats/torchao-adam.md states both.
#include <cstdint>

#include "lowbit/float_bits.hpp"

namespace lowbit {

// Reference: torch 2.15 aten/src/ATen/cpu/vec/vec256/vec256_bfloat16.h cvtfp32_bf16 (the vectorized
// CPU conversion every tensor copy takes, tails included): round to nearest, ties to even; every
// NaN becomes 0xFFFF (c10's scalar BFloat16 would give 0x7FC0; torch's CPU copy never uses it).
inline std::uint16_t bf16_round_nearest_even(float x) {
  const std::uint32_t u = bits_of(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0xFFFF;
  const std::uint32_t rounding_bias = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding_bias) >> 16);
}

// Reference: torch 2.15 c10/util/BFloat16.h round_to_nearest_even, what the scalar kernels (CPU
// capability default) convert with: the same rounding, every NaN 0x7FC0.
inline std::uint16_t bf16_round_nearest_even_c10(float x) {
  return (bits_of(x) & 0x7FFFFFFFu) > 0x7F800000u ? std::uint16_t{0x7FC0} : bf16_round_nearest_even(x);
}

// Reference: torchao 0.18 optim/quant_utils.py _fp32_to_bf16_sr: with r uniform in [0, 2^16), round
// away from zero (add 0x10000 to the truncated bits, in int32) when r < the low 16 bits, else
// truncate; then the exact float32 -> bf16 copy (.bfloat16()), whose NaN rule above applies: 0xFFFF
// vectorized (capabilities AVX2, AVX-512), c10's 0x7FC0 at capability default (a NaN with only low
// payload bits truncates to +-Inf; FLT_MAX can round up to Inf).
inline std::uint16_t bf16_stochastic_round(float x, std::int32_t r, bool vectorized = true) {
  const std::uint32_t u = bits_of(x);
  const std::uint32_t truncated = u & 0xFFFF0000u;
  const std::uint32_t rounded = static_cast<std::int32_t>(u & 0xFFFFu) > r ? truncated + 0x10000u : truncated;
  return vectorized ? bf16_round_nearest_even(float_from_bits(rounded)) : bf16_round_nearest_even_c10(float_from_bits(rounded));
}

}  // namespace lowbit
