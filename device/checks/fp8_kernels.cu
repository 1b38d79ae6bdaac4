// The FP8 conversions of CUDA's cuda_fp8.h, run on the GPU over every input (gpu_kernels.hpp).
#include <cuda_fp8.h>

#include "gpu_kernels.hpp"

namespace lowbit::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kBlocks = 132 * 16;  // a grid-stride loop: enough blocks to fill any current GPU

__device__ __nv_fp8_interpretation_t interpretation(bool e5m2) { return e5m2 ? __NV_E5M2 : __NV_E4M3; }
__device__ __nv_saturation_t saturation(bool satfinite) { return satfinite ? __NV_SATFINITE : __NV_NOSAT; }

__global__ void float_to_fp8_kernel(std::uint8_t* out, std::uint64_t first, std::uint64_t count, bool e5m2,
                                    bool satfinite) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const float x = __uint_as_float(static_cast<unsigned>(first + i));  // keeps a NaN's sign and payload
    out[i] = __nv_cvt_float_to_fp8(x, saturation(satfinite), interpretation(e5m2));
  }
}

__global__ void f16_to_fp8_kernel(std::uint8_t* out, bool e5m2, bool satfinite) {
  const unsigned h = blockIdx.x * blockDim.x + threadIdx.x;
  __half_raw r;
  r.x = static_cast<unsigned short>(h);
  out[h] = __nv_cvt_halfraw_to_fp8(r, saturation(satfinite), interpretation(e5m2));
}

__global__ void bf16_to_fp8_kernel(std::uint8_t* out, bool e5m2, bool satfinite) {
  const unsigned h = blockIdx.x * blockDim.x + threadIdx.x;
  __nv_bfloat16_raw r;
  r.x = static_cast<unsigned short>(h);
  out[h] = __nv_cvt_bfloat16raw_to_fp8(r, saturation(satfinite), interpretation(e5m2));
}

__global__ void fp8_to_f16_kernel(std::uint16_t* out, bool e5m2) {
  const unsigned c = threadIdx.x;
  out[c] = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), interpretation(e5m2)).x;
}

}  // namespace

void float_to_fp8(std::uint8_t* out, std::uint64_t first, std::uint64_t count, bool e5m2, bool satfinite) {
  float_to_fp8_kernel<<<kBlocks, kThreads>>>(out, first, count, e5m2, satfinite);
}
void f16_to_fp8(std::uint8_t* out, bool e5m2, bool satfinite) { f16_to_fp8_kernel<<<256, 256>>>(out, e5m2, satfinite); }
void bf16_to_fp8(std::uint8_t* out, bool e5m2, bool satfinite) { bf16_to_fp8_kernel<<<256, 256>>>(out, e5m2, satfinite); }
void fp8_to_f16(std::uint16_t* out, bool e5m2) { fp8_to_f16_kernel<<<1, 256>>>(out, e5m2); }

}  // namespace lowbit::gpu
