#pragma once
// Launchers of the GPU checks' kernels (device/checks/*.cu): plain host functions over device
// pointers, so that the checks themselves (gpu_checks.cpp) are host C++ built with the project's
// FP rules and the reference library. Each launches on the legacy default stream and returns at
// once; the caller synchronizes (gpu_runtime.hpp).
#include <cstdint>

namespace lowbit::gpu {

// out[i] = __nv_cvt_float_to_fp8(the float whose bits are first + i, ...) for i < count. On sm_89
// and later __NV_SATFINITE is the hardware cvt.rn.satfinite.{e4m3,e5m2}x2.f32; __NV_NOSAT is
// cuda_fp8.hpp's software path compiled for the device.
void float_to_fp8(std::uint8_t* out, std::uint64_t first, std::uint64_t count, bool e5m2, bool satfinite);
// out[h] for every 16-bit pattern h: __nv_cvt_halfraw_to_fp8 / __nv_cvt_bfloat16raw_to_fp8.
void f16_to_fp8(std::uint8_t* out, bool e5m2, bool satfinite);
void bf16_to_fp8(std::uint8_t* out, bool e5m2, bool satfinite);
// out[c] = __nv_cvt_fp8_to_halfraw(c).x for the 256 codes (cvt.rn.f16x2.{e4m3,e5m2}x2 on sm_89+).
void fp8_to_f16(std::uint16_t* out, bool e5m2);

// out[i] = bits of rcp.approx.ftz.f32(the float whose bits are first + i), i < count.
void rcp_approx_ftz(std::uint32_t* out, std::uint64_t first, std::uint64_t count);
// Every binary32 pattern through rcp.approx.ftz.f32, held against the prediction from `table` (the
// results for the 2^23 mantissas of [1, 2)) scaled by the exponent, with FTZ of subnormal inputs
// and results: counts[0] the mismatches, counts[1..] unused; first[0..cap) the first mismatching
// inputs found (in no order).
void check_rcp_scaling(const std::uint32_t* table, unsigned long long* counts, std::uint32_t* first, std::uint32_t cap);

// div.full.f32 (what Triton emits for an fp32 division) and its model RN(a * rcp.approx.ftz(b)) on
// n pseudo-random pairs from `seed`: a and b with exponents in [min_exp, max_exp] (unbiased) and
// random sign and mantissa. counts[0]: pairs, counts[1]: mismatches; first: up to cap mismatching
// pairs as (a bits, b bits, div.full bits, model bits).
void check_div_full(std::uint64_t n, std::uint64_t seed, int min_exp, int max_exp, unsigned long long* counts,
                    std::uint32_t* first, std::uint32_t cap);

// out[i] = powf(x[i], y[i]) as CUDA 13.0's libdevice __nv_powf inlines it, compiled as COAT builds
// its optimizer kernels (nvcc defaults: --fmad=true, IEEE division, no fast-math).
void powf_libdevice(const float* x, const float* y, float* out, std::uint64_t n);

}  // namespace lowbit::gpu
