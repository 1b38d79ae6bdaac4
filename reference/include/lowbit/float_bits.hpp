#pragma once
// Bit-level views of binary32 and the 16-bit storage formats. Widening bf16 and f16 to binary32 is
// exact, so every FP8 encoder that takes them converts them here first and rounds only once.
#include <bit>
#include <cstdint>

namespace lowbit {

constexpr std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }
constexpr float float_from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

// Distance in binary32 ulps between two non-NaN floats: the number of representable values stepped
// over going from a to b (+0 and -0 are one point). Bit patterns are mapped onto a line where
// consecutive floats are consecutive integers.
inline std::uint64_t ulp_distance(float a, float b) {
  auto ordinal = [](float x) -> std::int64_t {
    const std::uint32_t u = bits_of(x);
    const auto magnitude = static_cast<std::int64_t>(u & 0x7FFFFFFFu);
    return (u >> 31) ? -magnitude : magnitude;
  };
  const std::int64_t d = ordinal(a) - ordinal(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

// bfloat16 is the upper half of a binary32.
inline float widen_bf16(std::uint16_t h) { return float_from_bits(std::uint32_t{h} << 16); }

// IEEE binary16 (1-5-10, bias 15) to binary32; subnormals are renormalized, NaN payloads kept.
inline float widen_f16(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return float_from_bits(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0) return float_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return float_from_bits(sign);
  // Subnormal: value = mantissa * 2^-24; shift the leading one into the hidden-bit position.
  int shift = std::countl_zero(mantissa) - 21;  // places until bit 10 holds the leading one
  mantissa = (mantissa << shift) & 0x3FFu;
  const std::uint32_t biased = static_cast<std::uint32_t>(127 - 14 - shift);
  return float_from_bits(sign | (biased << 23) | (mantissa << 13));
}

}  // namespace lowbit
