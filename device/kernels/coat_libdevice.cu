// CUDA's own powf and log2f for our COAT optimizer kernels (coat_plugin.cu), compiled as COAT compiles
// its optimizer kernels: nvcc's defaults (--fmad=true, IEEE division and square root, no fast-math,
// no flush to zero), like device/checks/libdevice_powf.cu. conformance/CMakeLists.txt builds this file
// alone, without the project's --fmad=false, as relocatable device code that the plugin calls.
//
// Why not the reference's step-by-step sequences: libdevice's __nv_powf has one rcp.approx.ftz whose
// bits are the hardware's, and the contractions nvcc makes inside both functions depend on --fmad; the
// reference (reference/include/lowbit/cuda_libdevice.hpp: cuda::powf with the reciprocal table measured
// on an H200, cuda::log2f) models exactly what this compiles to under these flags (the H200 check:
// 0 mismatches between the two powf on 25 165 824 inputs of COAT's kinds). The host twin calls those
// models instead (coat_adamw.cuh).
#include "coat_libdevice.cuh"

namespace lowbit_kernels::coat {

__device__ float libdevice_powf(float x, float y) { return powf(x, y); }
__device__ float libdevice_log2f(float x) { return log2f(x); }

}  // namespace lowbit_kernels::coat
