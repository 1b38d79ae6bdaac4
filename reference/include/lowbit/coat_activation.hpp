#pragma once
// COAT's Triton activation quantizers (NVlabs/COAT 80ec99f, coat/activation/real_quantization/),
// bit-exact on the CPU. docs/formats/coat-activation.md states the arithmetic and every quirk.
#include <cstdint>
#include <span>
#include <vector>

#include "lowbit/fp8.hpp"

namespace lowbit::coat_act {

enum class ScaleDtype { BF16, F32 };    // what the stored scale tensor holds
// Every fp32 division of the kernels goes through div() below.
enum class Division {
  Ieee,             // RN(a/b): what Triton's CPU interpreter does (numpy float32 divide); verified
  DivFull,          // RN(a*rcp.approx.ftz(b)), the measured reciprocal: the GPU's div.full.f32 for
                    // operands of ordinary magnitude (docs/formats/coat-activation.md#division)
};
// How the kernel's casts round.
enum class Casts {
  Gpu,                // sm_90: fp8 cvt.rn.satfinite (NaN -> 0x7F), bf16 RNE (docs/formats/coat-activation.md)
  TritonInterpreter,  // Triton 3.9 TRITON_INTERPRET=1: its bit-field converter (see the .md)
};

struct Options {
  int group_size = 16;  // QB
  fp8::FormatId fp8 = fp8::FormatId::E4M3FN;  // params "fp8": "e4m3" | "e5m2"
  ScaleDtype scale_dtype = ScaleDtype::BF16;
  Division division = Division::Ieee;
  Casts casts = Casts::Gpu;
};

// COAT common.py FP8_MAX_VALUE: torch.finfo(dtype).max, the format's largest finite value.
float fp8_max(fp8::FormatId f);
float div(float a, float b, Division d);  // the one place every division happens
std::uint8_t cast_fp8(float x, fp8::FormatId f, Casts c);
std::uint16_t cast_bf16(float x, Casts c);
// The stored scale as float32 bits' value: bf16(S) widened, or S.
float stored_scale(float s, ScaleDtype d, Casts c);
// One step of a group's absmax: max(best, |x|) with NaN ignored (tl.max is maxnum; the interpreter's
// np.nanmax); start from NaN, which an all-NaN group keeps.
float absmax_step(float best, float x);
// A group's fp32 scale S = div(RN(amax + 1e-10f), fp8_max), from which its codes are made.
float group_scale(float amax, const Options& o);

struct Quantized {
  std::vector<std::uint8_t> codes;  // M x N (or N x M for the transposed part)
  std::vector<float> scale;         // the stored scale's value (bf16-representable when BF16)
};

// Row-major M x N input. Each throws std::invalid_argument naming the shape rule it enforces.
Quantized quantize_pergroup(std::span<const float> x, std::int64_t m, std::int64_t n, const Options& o);
struct PerTensor {
  std::vector<std::uint8_t> codes;  // M x N
  float scale;                      // the bf16 per-tensor scale s (as float)
  std::vector<float> group_scale;   // M x N/QB, bf16 stage-1 scales s_g
};
PerTensor quantize_pertensor_groupscale(std::span<const float> x, std::int64_t m, std::int64_t n, const Options& o);
struct Transposed {
  Quantized rows;        // y, s_y: 1 x QB groups along N; M x N and M x N/QB
  Quantized transposed;  // y_t, s_y_t: x^T quantized with 1 x QB groups along M; N x M and N x M/QB
};
Transposed quantize_pergroup_transposed(std::span<const float> x, std::int64_t m, std::int64_t n, const Options& o);
Quantized quantize_perblock(std::span<const float> x, std::int64_t m, std::int64_t n, const Options& o);

}  // namespace lowbit::coat_act
