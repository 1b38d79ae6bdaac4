#pragma once
// CUDA's libdevice log2f and powf, as nvcc 13.0 inlines them for sm_90
// (docs/formats/coat-optimizer.md#libdevice-log2f-and-powf-cuda-130), step by
// step in binary32 with explicit fused multiply-adds. log2f uses IEEE operations only; powf has one
// hardware reciprocal (rcp.approx.ftz.f32, MUFU.RCP), taken from a table measured on a GPU. Both
// are exact (device/checks: powf on 25 million inputs of COAT's kinds). NaNs the GPU generates are
// the canonical +NaN 0x7FFFFFFF.
#include <cstdint>

#include "lowbit/host_device.hpp"

namespace lowbit::cuda {

// The canonical NaN of NVIDIA fp32 arithmetic; x86 produces 0xFFC00000 (negative) instead.
inline constexpr std::uint32_t kCanonicalNan = 0x7FFFFFFFu;
// x with any NaN replaced by the GPU's canonical +NaN.
float canonical(float x);

// Reference: CUDA 13.0 libdevice __nv_log2f (inlined by nvcc for sm_90; IEEE operations only).
float log2f(float x);

// The one non-IEEE step of powf: rcp.approx.ftz.f32 (MUFU.RCP), which PTX documents only within
// 1 ulp. Measured on a GPU for the 2^23 inputs of [1, 2) (docs/device/README.md): the result for
// 1 + m * 2^-23, as bits, from the embedded table (reference/libdevice/cuda_rcp_table.cpp).
std::uint32_t rcp_approx_ftz_1_2(std::uint32_t m);

// Reference: rcp.approx.ftz.f32 as measured on an NVIDIA H200 (sm_90, CUDA 13.0), any input:
// the measured result on [1, 2) scaled by the exponent (rcp_approx_ftz_scaled's rule). Exact: the
// GPU checks held it against the hardware on all 2^32 inputs.
float rcp_approx_ftz(float b);

// The bits of rcp.approx.ftz.f32(x) for the binary32 pattern x, given r, the bits of the
// instruction's result for x's mantissa on [1, 2) (the float 1 + (x & 0x7FFFFF) * 2^-23; looked up
// by the caller for every x, a special one too): 1/(f * 2^e) = (1/f) * 2^-e, a subnormal x read as a
// zero of its sign (result infinity), a subnormal result flushed to a zero of its sign, 1/inf = 0,
// the canonical NaN for a NaN. Also compiled for the device: the GPU checks hold this very rule
// against the hardware on all 2^32 inputs (device/checks/approx_kernels.cu).
LOWBIT_HOST_DEVICE inline std::uint32_t rcp_approx_ftz_scaled_bits(std::uint32_t x, std::uint32_t r) {
  const std::uint32_t sign = x & 0x80000000u, ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return kCanonicalNan;
  if (ax == 0x7F800000u) return sign;  // 1/inf
  if (ax < 0x00800000u) return sign | 0x7F800000u;  // FTZ input: 1/±0
  const int biased = static_cast<int>(r >> 23) - (static_cast<int>(ax >> 23) - 127);
  if (biased <= 0) return sign;  // FTZ result
  return sign | static_cast<std::uint32_t>(biased) << 23 | (r & 0x007FFFFFu);
}

// rcp.approx.ftz.f32 of any b from results on [1, 2) (`results_1_2[m]` is the bits of the result
// for the float 1 + m * 2^-23, m < 2^23), by rcp_approx_ftz_scaled_bits.
float rcp_approx_ftz_scaled(const std::uint32_t* results_1_2, float b);

using ReciprocalFn = float (*)(float);

// Reference: CUDA 13.0 libdevice __nv_powf (inlined by nvcc for sm_90), with the measured
// rcp_approx_ftz for its reciprocal. `reciprocal` replaces it (the GPU checks pass the reciprocal
// they measure in the same run, and RN(1/b), the model used before the measurement).
float powf(float x, float y, ReciprocalFn reciprocal = rcp_approx_ftz);

}  // namespace lowbit::cuda
