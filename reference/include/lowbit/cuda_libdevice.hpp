#pragma once
// CUDA's libdevice log2f and powf, as nvcc 13.0 inlines them for sm_90
// (docs/formats/coat-optimizer.md#libdevice-log2f-and-powf-cuda-130), step by
// step in binary32 with explicit fused multiply-adds. log2f uses IEEE operations only; powf has one
// hardware reciprocal (rcp.approx.ftz.f32, MUFU.RCP), taken from a table measured on a GPU. Both
// are exact (device/checks: powf on 25 million inputs of COAT's kinds). NaNs the GPU generates are
// the canonical +NaN 0x7FFFFFFF.
#include <cstdint>

namespace lowbit::cuda {

// The canonical NaN of NVIDIA fp32 arithmetic; x86 produces 0xFFC00000 (negative) instead.
inline constexpr std::uint32_t kCanonicalNan = 0x7FFFFFFFu;
// x with any NaN replaced by the GPU's canonical +NaN.
float canonical(float x);

// Reference: CUDA 13.0 libdevice __nv_log2f (inlined by nvcc for sm_90; IEEE operations only).
float log2f(float x);

// The one non-IEEE step of powf: rcp.approx.ftz.f32 (MUFU.RCP), which PTX documents only within
// 1 ulp. Measured on a GPU for the 2^23 inputs of [1, 2) (docs/device/README.md): the result for
// 1 + m * 2^-23, as bits, from the embedded table (src/cuda_rcp_table.cpp).
std::uint32_t rcp_approx_ftz_1_2(std::uint32_t m);

// Reference: rcp.approx.ftz.f32 as measured on an NVIDIA H200 (sm_90, CUDA 13.0), any input:
// the measured result on [1, 2) scaled by the exponent (rcp_approx_ftz_scaled's rule). Exact: the
// GPU checks held it against the hardware on all 2^32 inputs.
float rcp_approx_ftz(float b);

// rcp.approx.ftz.f32 of any b from results on [1, 2) (`results_1_2[m]` is the bits of the result
// for the float 1 + m * 2^-23, m < 2^23): 1/(f * 2^e) = (1/f) * 2^-e, with a subnormal b read as a
// zero of its sign (result infinity), a subnormal result flushed to a zero of its sign, 1/inf = 0
// and the canonical NaN for a NaN. device/checks holds this rule against the hardware.
float rcp_approx_ftz_scaled(const std::uint32_t* results_1_2, float b);

using ReciprocalFn = float (*)(float);

// Reference: CUDA 13.0 libdevice __nv_powf (inlined by nvcc for sm_90), with the measured
// rcp_approx_ftz for its reciprocal. `reciprocal` replaces it (the GPU checks pass the reciprocal
// they measure in the same run, and RN(1/b), the model used before the measurement).
float powf(float x, float y, ReciprocalFn reciprocal = rcp_approx_ftz);

}  // namespace lowbit::cuda
