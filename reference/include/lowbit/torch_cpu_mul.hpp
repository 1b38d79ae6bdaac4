#pragma once
// Whose NaN torch's CPU multiply returns when both operands are NaN, for the broadcast products the
// formats compute (torchao's FP8 dequantize codes.float() * scale, COAT's SymmQuantizer Q * scale):
// a first operand of `length` contiguous elements times one broadcast value. x86 returns an
// instruction's first source's NaN, and torch's compiled loop orders the operands differently by lane.
#include <cstdint>

namespace lowbit {

// True: element p (0 .. length-1) gets the broadcast (second) operand's NaN; false: its own. Observed
// with torch 2.15 on every length from 1 to 50 (docs/formats/coat-fake.md, torchao-fp8.md): the loop
// takes chunks of 16, then the rest.
//   vectorized (CPU capability AVX2): the broadcast's, except in the rest (length mod 16 elements),
//     taken in groups of 4 from its start, the last group's elements after its first: their own;
//   scalar (capability default): in each chunk of 16, its first 3 the broadcast's and the other 13
//     their own; the rest the broadcast's.
// AVX-512 (chunks of 32?) is not observed; it is taken as AVX2.
inline bool torch_mul_broadcast_nan_wins(std::int64_t p, std::int64_t length, bool vectorized) {
  const std::int64_t rest = length % 16, rest_start = length - rest;
  if (!vectorized) return p >= rest_start || p % 16 < 3;
  if (p < rest_start) return true;
  return p <= rest_start + (rest - 1) / 4 * 4;  // up to the first element of the rest's last group of 4
}

}  // namespace lowbit
