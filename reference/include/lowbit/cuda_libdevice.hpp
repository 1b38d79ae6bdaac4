#pragma once
// CUDA's libdevice log2f and powf, as nvcc 13.0 inlines them for sm_90
// (docs/formats/coat-optimizer.md#libdevice-log2f-and-powf-cuda-130), step by
// step in binary32 with explicit fused multiply-adds. log2f uses IEEE operations only and is
// reproduced exactly; powf has one hardware reciprocal (rcp.approx.ftz.f32, MUFU.RCP) whose bits are
// not public: rcp_approx_ftz below is its CPU model, RN(1/b), documented as approximate until a
// table measured on a GPU replaces it. NaNs the GPU generates are the canonical +NaN 0x7FFFFFFF.
#include <cstdint>

namespace lowbit::cuda {

// The canonical NaN of NVIDIA fp32 arithmetic; x86 produces 0xFFC00000 (negative) instead.
inline constexpr std::uint32_t kCanonicalNan = 0x7FFFFFFFu;
// x with any NaN replaced by the GPU's canonical +NaN.
float canonical(float x);

// Reference: CUDA 13.0 libdevice __nv_log2f (inlined by nvcc for sm_90; IEEE operations only).
float log2f(float x);

// The one non-IEEE step of powf: rcp.approx.ftz.f32 for b in [1.7, 2.42]. CPU model: RN(1 / b).
// APPROXIMATE: PTX documents the instruction within 1 ulp; the hardware's bits are unmeasured.
float rcp_approx_ftz(float b);

// Reference: CUDA 13.0 libdevice __nv_powf (inlined by nvcc for sm_90), with rcp_approx_ftz for its
// reciprocal; exact wherever that reciprocal is.
float powf(float x, float y);

}  // namespace lowbit::cuda
