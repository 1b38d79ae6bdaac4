// Our CUDA kernel of bitsandbytes' 8-bit block-wise AdEMAMix (bnb.ademamix8bit.cuda), over the plugin
// ABI (LOWBIT_MEMORY_CUDA), bit for bit the reference's IEEE model of bitsandbytes' two-state kernel.
// The arithmetic is in bnb_ademamix_cuda.cuh, shared with the host twin (bnb_ademamix_host_twin.cpp) that
// lowbit verify checks on every machine; this file adds bitsandbytes' parallel structure (csrc/ops.cu:
// one thread block per block of 256 elements, here one slot per thread) and the three maxima through
// shared memory. The step's scalars are computed on the host from the step copied back (as bitsandbytes
// computes them in Python and its launch). The kernel launches on the legacy default stream; the
// harness synchronizes.
#include <cuda_runtime.h>

#include "bnb_ademamix_glue.hpp"

namespace {

using namespace lowbit_kernels;
using namespace lowbit_kernels::bnb_ademamix;

__device__ float dequantized(const StateArgs& s, uint64_t i, uint64_t b) { return mul_rn(s.qmap[s.codes[i]], s.scale[b]); }

__global__ void __launch_bounds__(kBlock) ademamix_kernel(StepArgs a, Scalars s) {
  __shared__ Moments all[kBlock];
  __shared__ Moments block_max;
  const uint64_t b = blockIdx.x, i = b * kBlock + threadIdx.x;  // n is a multiple of 256: every slot is real
  const Moments own = moments(a.grad[i], {dequantized(a.m1, i, b), dequantized(a.m2, i, b), dequantized(a.nu, i, b)}, s);
  all[threadIdx.x] = own;
  __syncthreads();
  if (threadIdx.x == 0) {  // the maxima are exact in any order: thread 0 takes the slots in turn
    Moments m{float_of(kNegFltMaxBits), float_of(kNegFltMaxBits), float_of(kNegFltMaxBits)};
    for (unsigned j = 0; j < kBlock; ++j) {
      m.m1 = amax_step(m.m1, all[j].m1);
      m.m2 = amax_step(m.m2, all[j].m2);
      m.nu = amax_step(m.nu, all[j].nu);
    }
    block_max = m;
    a.m1.scale_next[b] = m.m1;
    a.m2.scale_next[b] = m.m2;
    a.nu.scale_next[b] = m.nu;
  }
  __syncthreads();
  a.param_next[i] = parameter(a.param[i], a.grad[i], own, s);
  a.m1.codes_next[i] = code(own.m1, block_max.m1, a.m1.qmap);
  a.m2.codes_next[i] = code(own.m2, block_max.m2, a.m2.qmap);
  a.nu.codes_next[i] = search(div_rn(own.nu, block_max.nu), a.nu.qmap);
}

int32_t step_on_device(const StepArgs& a, char* error, uint64_t capacity) {
  int64_t step = 0;
  cudaError_t e = cudaMemcpy(&step, a.step, sizeof step, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return snprintf(error, capacity, "reading the step: %s", cudaGetErrorString(e)), 1;
  if (step < 1 || step > 0x7FFFFFFF) return snprintf(error, capacity, "step %lld is no int32 >= 1", static_cast<long long>(step)), 1;
  const uint64_t blocks = a.n / kBlock;
  if (blocks > 0x7FFFFFFFull)
    return snprintf(error, capacity, "%llu blocks: more than a grid holds", static_cast<unsigned long long>(blocks)), 1;
  ademamix_kernel<<<static_cast<unsigned>(blocks), kBlock>>>(a, scalars(a.h, static_cast<int32_t>(step)));
  // a launch error lives in this library's CUDA runtime only: the harness cannot see it, so say it here
  e = cudaGetLastError();
  if (e != cudaSuccess) return snprintf(error, capacity, "launching the AdEMAMix kernel: %s", cudaGetErrorString(e)), 1;
  return 0;
}

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  return lowbit_kernels::bnb_ademamix::plugin_of<step_on_device>("cuda.bnb.ademamix8bit.cuda", LOWBIT_MEMORY_CUDA);
}
