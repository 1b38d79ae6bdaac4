// A CUDA kernel of ours over the plugin ABI (LOWBIT_MEMORY_CUDA): fp8.perblock.e4m3 on the device, bit
// for bit the reference (perblock_e4m3.cuh has the arithmetic and why each step is written as it is).
// One thread block per quantization block: the threads reduce the block's amax through warp shuffles
// and one shared-memory step, and each thread casts and dequantizes its elements.
// Built with PERBLOCK_MUTANT_RECIPROCAL it is the mutant cuda_mutant_perblock_reciprocal (x times
// 1/scale), which verify must catch. Launched on the legacy default stream; the harness synchronizes.
#include <cuda_runtime.h>

#include "perblock_e4m3.cuh"
#include "perblock_glue.hpp"

namespace {

constexpr int kThreads = 256;

__global__ void perblock_kernel(const float* x, uint64_t n, uint64_t block, uint8_t* codes, float* scale,
                                float* dequant) {
  __shared__ float warp_amax[kThreads / 32];
  const uint64_t start = static_cast<uint64_t>(blockIdx.x) * block;
  const uint64_t end = start + block < n ? start + block : n;
  float amax = 0.0f;
  for (uint64_t i = start + threadIdx.x; i < end; i += kThreads) amax = perblock::amax_step(amax, x[i]);
  // within each warp through shuffles, then across the 8 warps in one shared-memory step; every thread
  // ends with the block's amax (max is exact: any order gives the reference's value)
  for (int offset = 16; offset > 0; offset /= 2) amax = perblock::amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, offset));
  if (threadIdx.x % 32 == 0) warp_amax[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = warp_amax[0];
  for (int w = 1; w < kThreads / 32; ++w) amax = perblock::amax_step(amax, warp_amax[w]);
  const float s = perblock::scale_of(amax);
  if (threadIdx.x == 0) scale[blockIdx.x] = s;
  for (uint64_t i = start + threadIdx.x; i < end; i += kThreads) {
    const uint8_t c = perblock::code_of(x[i], s);
    codes[i] = c;
    dequant[i] = perblock::dequant_of(c, s);
  }
}

int32_t compute_on_device(const float* x, uint64_t n, uint64_t block, uint8_t* codes, float* scale, float* dequant,
                          char* error, uint64_t capacity) {
  const uint64_t blocks = (n + block - 1) / block;
  if (blocks == 0) return 0;
  if (blocks > 0x7FFFFFFFull) return snprintf(error, capacity, "%llu blocks: more than a grid holds", static_cast<unsigned long long>(blocks)), 1;
  perblock_kernel<<<static_cast<unsigned>(blocks), kThreads>>>(x, n, block, codes, scale, dequant);
  // A launch error lives in this library's CUDA runtime only: the harness cannot see it, so say it here.
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return snprintf(error, capacity, "launching the kernel: %s", cudaGetErrorString(e)), 1;
  return 0;  // the kernel may still be running: the harness synchronizes
}

int32_t run(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
            uint64_t capacity) {
  return perblock::run(compute_on_device, in, n_in, params, out, n_out, error, capacity);
}

#ifdef PERBLOCK_MUTANT_RECIPROCAL
const char* const kName = "cuda.fp8.perblock.e4m3.reciprocal";
#else
const char* const kName = "cuda.fp8.perblock.e4m3";
#endif

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  static const lowbit_kernel kernels[] = {{kName, "fp8.perblock.e4m3", LOWBIT_MEMORY_CUDA, run}};
  static const lowbit_plugin plugin = {LOWBIT_PLUGIN_ABI_VERSION, 1, kernels};
  return &plugin;
}
