#pragma once
// powf and log2f as COAT's optimizer kernels get them (NVlabs/COAT 80ec99f coat/optimizer/kernels/
// fp8_adamw_expand_cuda_kernel.cu and fp8_adamw_cuda_kernel.cu call powf, log2f): on the device CUDA's
// own libdevice functions from coat_libdevice.cu (relocatable device code compiled with nvcc's
// defaults, as COAT builds them), on the host the reference's models of exactly those
// (lowbit::cuda::powf with the rcp.approx.ftz table measured on an H200, lowbit::cuda::log2f;
// reference/include/lowbit/cuda_libdevice.hpp, docs/formats/coat-optimizer.md#libdevice-log2f-and-powf-cuda-130).
#include "lowbit/cuda_libdevice.hpp"

namespace lowbit_kernels::coat {

#if defined(__CUDACC__)
__device__ float libdevice_powf(float x, float y);
__device__ float libdevice_log2f(float x);
#endif

LOWBIT_HOST_DEVICE inline float powf_coat(float x, float y) {
#ifdef __CUDA_ARCH__
  return libdevice_powf(x, y);
#else
  return lowbit::cuda::powf(x, y);
#endif
}

LOWBIT_HOST_DEVICE inline float log2f_coat(float x) {
#ifdef __CUDA_ARCH__
  return libdevice_log2f(x);
#else
  return lowbit::cuda::log2f(x);
#endif
}

}  // namespace lowbit_kernels::coat
