// Our CUDA kernels of bitsandbytes' 8-bit block-wise one-state rules (bnb.lion8bit.cuda,
// bnb.momentum8bit.cuda, bnb.rmsprop8bit.cuda, bnb.adagrad8bit.cuda), over the plugin ABI (LOWBIT_MEMORY_CUDA), bit for bit the reference's IEEE
// model of bitsandbytes' one-state kernel. The per-slot arithmetic is in bnb_one_state_cuda.cuh,
// shared with the host twin (bnb_one_state_host_twin.cpp) that
// lowbit verify checks on every machine; this file adds bitsandbytes' parallel structure (csrc/ops.cu:
// one thread block of 256 threads per block of 256 elements, one slot per thread, the tail's padding
// slots included) and the block's maximum through shared memory. The kernel launches on the legacy
// default stream; the harness synchronizes.
#include <cuda_runtime.h>

#include "bnb_one_state_glue.hpp"

namespace {

using namespace lowbit_kernels;
using namespace lowbit_kernels::bnb_one_state;

__global__ void __launch_bounds__(kBlock) one_state_kernel(StepArgs a) {
  __shared__ float states[kBlock];
  __shared__ float block_absmax;
  const uint64_t b = blockIdx.x, i = b * kBlock + threadIdx.x;
  const bool real = i < a.n;
  const float s0 = mul_rn(a.qmap[real ? a.codes[i] : kPadCode], a.scale[b]);
  const Slot own = slot(a.rule, real ? a.param[i] : 0.0f, real ? a.grad[i] : 0.0f, s0, *a.step, a.s);
  states[threadIdx.x] = own.state;
  __syncthreads();
  if (threadIdx.x == 0) {  // the maximum is exact in any order: thread 0 takes the slots in turn
    float m = float_of(kNegFltMaxBits);
    for (unsigned j = 0; j < kBlock; ++j) m = amax_step(m, states[j]);
    block_absmax = m;
    a.scale_next[b] = m;
  }
  __syncthreads();
  if (real) {
    a.param_next[i] = own.param;
    a.codes_next[i] = code(own.state, block_absmax, a.qmap);
  }
}

int32_t step_on_device(const StepArgs& a, char* error, uint64_t capacity) {
  const uint64_t blocks = (a.n + kBlock - 1) / kBlock;
  if (blocks > 0x7FFFFFFFull)
    return snprintf(error, capacity, "%llu blocks: more than a grid holds", static_cast<unsigned long long>(blocks)), 1;
  one_state_kernel<<<static_cast<unsigned>(blocks), kBlock>>>(a);
  // a launch error lives in this library's CUDA runtime only: the harness cannot see it, so say it here
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return snprintf(error, capacity, "launching the one-state kernel: %s", cudaGetErrorString(e)), 1;
  return 0;
}

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  static const char* const names[] = {"cuda.bnb.lion8bit.cuda", "cuda.bnb.momentum8bit.cuda",
                                      "cuda.bnb.rmsprop8bit.cuda", "cuda.bnb.adagrad8bit.cuda"};
  return lowbit_kernels::bnb_one_state::plugin_of<step_on_device>(names, LOWBIT_MEMORY_CUDA);
}
