#pragma once
// torchao's block-wise states, per element, for our CUDA kernels (blockwise_plugin.cu) and their host
// twin (blockwise_host_twin.cpp): the codebook states torchao.codebook8/4.signed/unsigned and the FP8
// state torchao.fp8. Each function is one step of the reference (reference/codebook/blockwise.cpp
// torchao_quantize, torchao_dequantize, torchao_fp8_quantize, torchao_fp8_dequantize; reference/codebook/
// codebook.cpp torchao_search) in the same binary32 operations; docs/formats/torchao-codebook.md and
// torchao-fp8.md state the arithmetic.
#include "e4m3.cuh"
#include "ieee_ops.cuh"
#include "lowbit/torch_cpu_mul.hpp"

namespace lowbit_kernels::torchao {

constexpr float kScaleFloor = 1e-12f;  // f32(1e-12) = 0x2B8CBCCC, torch's clip(1e-12)
constexpr float kE4M3Max = 448.0f;

// The block's scale from its NaN-ignoring absmax: max(amax, 1e-12); a block holding a NaN gets torch's
// amax(|x|) of it, the canonical NaN 0x7FC00000 whatever the NaN's sign and payload (first_nan's bits
// play no part; docs/formats/torchao-codebook.md), which torch's clip keeps.
LOWBIT_HOST_DEVICE inline float codebook_scale(float amax, bool has_nan, float first_nan) {
  (void)first_nan;
  if (has_nan) return float_of(0x7FC00000u);
  return amax < kScaleFloor ? kScaleFloor : amax;
}

// Reference: torchao 0.18 optim/quant_utils.py quantize_8bit_with_qmap / quantize_4bit_with_qmap (the
// reference's codebook::torchao_search): branchless search from size/2, halving the step, then up when
// (y - q[c]) >= (q[c+1] - q[c]) * 0.5 (ties up), capped at the top code; NaN goes to code 0. size is
// 16 or 256.
LOWBIT_HOST_DEVICE inline uint8_t search(float y, const float* q, uint32_t size) {
  uint32_t c = y >= q[size / 2] ? size / 2 : 0;
  for (uint32_t s = size / 4; s >= 1; s /= 2) c += y >= q[c + s] ? s : 0;
  const uint32_t up = c + 1 < size ? c + 1 : size - 1;
  const float r = add_rn(y, -q[c]);
  const float half = mul_rn(add_rn(q[up], -q[c]), 0.5f);
#ifdef LOWBIT_KERNELS_MUTANT_TIES_DOWN
  return static_cast<uint8_t>(r > half ? up : c);  // the mutant: ties go down
#else
  return static_cast<uint8_t>(r >= half ? up : c);
#endif
}

// One element of a codebook state: its code, y = x / scale (true division).
LOWBIT_HOST_DEVICE inline uint8_t codebook_code(float x, float scale, const float* q, uint32_t size) {
  return search(div_x86(x, scale), q, size);
}

// Reference: torchao 0.18 optim/quant_utils.py dequant_with_qmap: qmap[code] * scale.
LOWBIT_HOST_DEVICE inline float codebook_dequant(uint8_t code, float scale, const float* q) { return mul_x86(q[code], scale); }

// torchao 0.18 optim/subclass_4bit.py packing: byte j = (code[2j] << 4) | code[2j+1].
LOWBIT_HOST_DEVICE inline uint8_t pack_pair(uint8_t first, uint8_t second) {
  return static_cast<uint8_t>((first << 4) | (second & 0x0Fu));
}

// ---- torchao.fp8 ----------------------------------------------------------------------------------

// Reference: torchao 0.18 optim/subclass_fp8.py quantize_fp8: scale = max(amax, 1e-12) / 448, a true
// division (a NaN scale comes out quieted, as x86 divides it).
LOWBIT_HOST_DEVICE inline float fp8_scale(float amax, bool has_nan, float first_nan) {
  return div_x86(codebook_scale(amax, has_nan, first_nan), kE4M3Max);
}

// The E4M3 cast and its policy are e4m3.cuh's (shared with the per-block and COAT kernels).
using lowbit_kernels::encode_e4m3;
using lowbit_kernels::Fp8Cast;

LOWBIT_HOST_DEVICE inline uint8_t fp8_code(float x, float scale, Fp8Cast cast) { return encode_e4m3(div_x86(x, scale), cast); }

// Reference: torchao 0.18 optim/subclass_fp8.py OptimStateFp8.dequantize: float(code) * scale, a NaN
// code widened to nan_bits | sign (0x7FF00000: c10's scalar path; 0x7FC00000: the AVX-512 one). A NaN
// scale wins as it is, except over a NaN code where torch's CPU loop returns the code's NaN: element i
// of n in blocks of block_size, by torch_cpu_mul.hpp's rule for the vectorized loops (capability AVX2,
// the format's default).
LOWBIT_HOST_DEVICE inline float fp8_dequant(uint8_t c, float scale, uint32_t nan_bits, uint64_t i, uint64_t block,
                                            uint64_t n) {
  const float v = decode_e4m3_or(c, float_of(nan_bits | (static_cast<uint32_t>(c & 0x80u) << 24)));
  if (is_nan(scale))
    return is_nan(v) && !lowbit::torchao_fp8_scale_nan_wins(static_cast<int64_t>(i), static_cast<int64_t>(block),
                                                            static_cast<int64_t>(n), true)
               ? v
               : scale;
  return mul_x86(v, scale);
}

}  // namespace lowbit_kernels::torchao
