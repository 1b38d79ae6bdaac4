#pragma once
// COAT's "fake quantization" (NVlabs/COAT 80ec99f, coat/activation/fake_quantization/), bit-exact on
// the CPU. docs/formats/coat-fake.md states the arithmetic, every quirk, and what is GPU-only.
#include <cstdint>
#include <span>
#include <vector>

#include "lowbit/fp8.hpp"

namespace lowbit::coat_fake {

// The FP8 format of a quantizer is an fp8::FormatId (params "fp8": "e4m3" | "e5m2"): COAT's
// (e_bit, m_bit) are its exponent and mantissa bits, SymmQuantizer's Qp its largest finite value.
// Where the Triton kernel (and the torch scalar division in SymmQuantizer) runs. Finite results are
// the same on both; they differ in the NaN bits and in how torch divides by a Python scalar.
enum class Model {
  Interpreter,  // TRITON_INTERPRET=1 + torch CPU on x86: numpy/SSE NaN propagation, true division
  Gpu,          // CUDA: every generated NaN is the canonical 0x7FFFFFFF; torch `t / 896` is t * RN(1/896)
};

// libdevice.round (__nv_roundf): round half away from zero.
float round_half_away(float v);

// One element of FloatPointQuantizeTriton.floatExMy_quantize_triton (stochastic=False).
float floatexmy_triton(float x, fp8::FormatId f, Model m);
// One element of FloatPointQuantizeTorch.floatExMy_quantize_torch (stochastic=False, ceil=False),
// torch 2.x on the CPU: torch.round is half-to-even and x.sign() maps -0 (and NaN) to +0.
float floatexmy_torch(float x, fp8::FormatId f);

struct Symm {
  std::vector<float> rq;     // M x N: Q * scale (block_reshape'd back)
  std::vector<float> q;      // M x N: the fake-quantized x / scale
  std::vector<float> scale;  // one per block, blocks in block_cut order (row-block major)
};
// block_cut(x, row_block, col_block) (no padding; -1 means the whole dimension), then
// SymmQuantizer.forward(symm=True, bits="E4M3"/"E5M2", stochastic=False, epsilon), then
// block_reshape. Row-major M x N input; throws std::invalid_argument when a block size does not
// divide its dimension (COAT asserts). vectorized_mul: torch's CPU capability (AVX2, AVX-512: true;
// default: false), which decides whose NaN Q * scale returns when both are NaN.
Symm symm_quantize(std::span<const float> x, std::int64_t m, std::int64_t n, std::int64_t row_block,
                   std::int64_t col_block, float epsilon, fp8::FormatId f, Model model, bool vectorized_mul = true);

// The block scale: (2 * absmax) / (Qp - Qn) as torch computes it for the model.
float symm_scale(float absmax, fp8::FormatId f, Model model);

}  // namespace lowbit::coat_fake
