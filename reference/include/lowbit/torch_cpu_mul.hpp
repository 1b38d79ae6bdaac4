#pragma once
// Whose NaN torch's CPU multiply returns when both operands are NaN, for the products the formats
// compute (torchao's FP8 dequantize codes.float() * scale, COAT's SymmQuantizer Q * scale): a first
// operand of `length` contiguous elements times one broadcast value, or (blocks of one element) two
// tensors of the same shape. x86 returns an instruction's first source's NaN, and torch's compiled
// loops order the operands differently by lane (docs/formats/torchao-fp8.md, "Whose NaN").
// Plain integer functions, also compiled for the device: our CUDA torchao.fp8 kernel
// (device/kernels/torchao_blockwise.cuh) gives the reference's bits by the same rules.
#include <cstdint>

#include "lowbit/host_device.hpp"

namespace lowbit {

// True: element p (0 .. length-1) gets the broadcast (second) operand's NaN; false: its own. Observed
// with torch 2.15 on every length from 1 to 50 (docs/formats/coat-fake.md, torchao-fp8.md): the loop
// takes chunks of 16, then the rest.
//   vectorized (CPU capability AVX2): the broadcast's, except in the rest (length mod 16 elements),
//     taken in groups of 4 from its start, the last group's elements after its first: their own;
//   scalar (capability default): in each chunk of 16, its first 3 the broadcast's and the other 13
//     their own; the rest the broadcast's.
// AVX-512 gives the AVX2 pattern (observed for every length from 2 to 129).
LOWBIT_HOST_DEVICE inline bool torch_mul_broadcast_nan_wins(std::int64_t p, std::int64_t length, bool vectorized) {
  const std::int64_t rest = length % 16, rest_start = length - rest;
  if (!vectorized) return p >= rest_start || p % 16 < 3;
  if (p < rest_start) return true;
  return p <= rest_start + (rest - 1) / 4 * 4;  // up to the first element of the rest's last group of 4
}

// True: element p (0 .. n-1) of a * b, a and b two contiguous tensors of n elements (no broadcast:
// torchao's FP8 dequantize with block_size 1, COAT's 1x1 tiles), gets b's NaN; false: a's. torch 2.15's
// element-wise loop (aten/src/ATen/native/cpu/Loops.h vectorized_loop) takes chunks of
// 2 * Vectorized<float>::size() with Vectorized<float>::operator*, then hands the rest to basic_loop,
// the scalar a * b the compiler vectorized on its own; observed for every n from 1 to 300 at each
// capability (the same pattern at AVX2 and AVX-512: their chunks of 16 and 32 leave rests alike):
//   vectorized (AVX2, AVX-512): b's in the chunks of 16; in the rest (r = n mod 16 elements) b's for
//     its first 8 when r >= 8, then a's for 4 when r mod 8 >= 4, then of the last r mod 4 the first two
//     b's and a third a's (b's when r is 3: the rest never reached the compiler's vector loop);
//   scalar (default): in each chunk of 16, places 9 to 12 b's and the other 12 a's; the rest b's,
//     except its last element when r is odd and at least 3 (a's).
// One loop over n elements: torch splits a loop of more than 32 768 elements (at::internal::GRAIN_SIZE)
// among its threads, each part with its own chunks and rest, which this does not model.
LOWBIT_HOST_DEVICE inline bool torch_mul_same_shape_b_nan_wins(std::int64_t p, std::int64_t n, bool vectorized) {
  const std::int64_t r = n % 16, rest_start = n - r;
  if (!vectorized) return p < rest_start ? (p % 16 >= 9 && p % 16 < 13) : !(r % 2 == 1 && r >= 3 && p == n - 1);
  if (p < rest_start) return true;
  const std::int64_t q = p - rest_start, eights = r / 8 * 8, fours = r % 8 >= 4 ? 4 : 0;
  if (q < eights) return true;
  if (q < eights + fours) return false;
  return !(q - eights - fours == 2 && r != 3);
}

// torchao's FP8 dequantize, codes.float().view(-1, block_size) * scale.view(-1, 1), where element i of
// n and its block's scale are both NaN: true when torch returns the scale's NaN. Blocks of one element
// make the product two tensors of the same shape (torch's element-wise loop over all n elements), larger
// ones a broadcast of each block's scale (its loop over the block).
LOWBIT_HOST_DEVICE inline bool torchao_fp8_scale_nan_wins(std::int64_t i, std::int64_t block_size, std::int64_t n,
                                                          bool vectorized) {
  if (block_size == 1) return torch_mul_same_shape_b_nan_wins(i, n, vectorized);
  return torch_mul_broadcast_nan_wins(i % block_size, block_size, vectorized);
}

}  // namespace lowbit
