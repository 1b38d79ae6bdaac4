#pragma once
// Per-block E4M3 (format fp8.perblock.e4m3, docs/formats/fp8.md "Per-block E4M3") written out step by
// step for the CUDA plugin (cuda_perblock_plugin.cu) and for its host twin (cuda_perblock_host_twin.cpp,
// the same functions compiled for the CPU, which verify checks on every machine). Every operation is
// the reference's (reference/codebook/blockwise.cpp fp8_perblock_quantize / _dequantize) in IEEE binary32:
// __fdiv_rn / __fmul_rn on the device, / and * on the host (built with -ffp-contract=off), nothing
// fused, no fast-math, subnormals kept (nvcc's default -ftz=false).
//
// The E4M3 cast is written out rather than taken from cuda_fp8.h: the reference is CUDA's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) as cuda_fp8.hpp's host path computes it (NaN ->
// 0x7F with the sign dropped, Inf -> +-448), and on sm_89+ the intrinsic is the cvt.rn.satfinite
// instruction instead, whose NaN sign this project has not measured. Written out, the device and the
// host twin run the same integer steps, and the twin is checked against the reference on the CPU.
#include "e4m3.cuh"
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
// under fp8::cuda_satfinite(), reference/include/lowbit/fp8.hpp): 0x7F for every NaN, +-448 for Inf.
LOWBIT_HOST_DEVICE inline uint8_t encode_e4m3_satfinite(float x) {
  return lowbit_kernels::encode_e4m3(x, lowbit_kernels::Fp8Cast{true, false});
}

// E4M3FN -> float32, exact; NaN as the reference decodes it (0x7FC00000 with the code's sign).
LOWBIT_HOST_DEVICE inline float decode_e4m3(uint8_t c) {
  return lowbit_kernels::decode_e4m3_or(c, float_of((static_cast<uint32_t>(c & 0x80u) << 24) | 0x7FC00000u));
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
