// CUDA's own powf on the GPU (gpu_kernels.hpp), compiled as COAT compiles its optimizer kernels:
// nvcc's defaults, --fmad=true among them (device/CMakeLists.txt builds this file alone without the
// project's --fmad=false). The reference's cuda::powf is held against what this returns.
#include <cmath>

#include "gpu_kernels.hpp"

namespace lowbit::gpu {

namespace {

__global__ void powf_kernel(const float* x, const float* y, float* out, std::uint64_t n) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x)
    out[i] = powf(x[i], y[i]);
}

}  // namespace

void powf_libdevice(const float* x, const float* y, float* out, std::uint64_t n) {
  powf_kernel<<<132 * 16, 256>>>(x, y, out, n);
}

}  // namespace lowbit::gpu
