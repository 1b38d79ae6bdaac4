// Our CUDA kernels of COAT's FP8 AdamW step, over the plugin ABI (LOWBIT_MEMORY_CUDA), bit for bit the
// CPU reference: coat.optim.origin.e4m3 (no expansion) and coat.optim.expand.e4m3 (Dynamic Range
// Expansion). The per-element and per-group arithmetic is in coat_adamw.cuh, shared with the host twin
// (coat_host_twin.cpp) that lowbit verify checks on every machine; this file adds the parallel
// structure only, which is COAT's own (NVlabs/COAT 80ec99f coat/optimizer/kernels/fp8_adamw_cuda_kernel.cu,
// fp8_adamw_expand_cuda_kernel.cu): one thread block of 128 threads per quantization group, one element
// per thread (threads past the end hold 0, and FLT_MAX for the minimum), the group's statistics by
// __shfl_down_sync trees in each warp and then over the four warp results in warp 0 (lanes 4-31 holding
// 0 for the maximum, 1e9 for the minimum). The maximum is order-free; the expansion's minimum is not
// (it skips a zero only when one arrives), so its tree is COAT's, offset for offset. Unlike COAT, the
// group maximum plus QUANT_MIN_VAL is computed once per thread, not added into shared memory without a
// barrier (COAT's race; the reference models one addition).
//
// powf and log2f are CUDA's own, from coat_libdevice.cu (relocatable device code compiled with nvcc's
// defaults as COAT's kernels are; coat_libdevice.cuh). Kernels launch on the legacy default stream;
// the harness synchronizes.
#include <cuda_runtime.h>

#include "coat_glue.hpp"

namespace {

using namespace lowbit_kernels;
using namespace lowbit_kernels::coat;

constexpr unsigned kFullMask = 0xFFFFFFFFu;

// One warp's shuffle-down tree of the maximum or the minimum; lane 0 ends with the warp's result.
__device__ float warp_tree(float x, bool minimum) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float received = __shfl_down_sync(kFullMask, x, offset);
    x = minimum ? combine_min(x, received) : combine_max(x, received);
  }
  return x;
}

struct Stats {
  float max, min;
};

// The group's maximum (and with expansion minimum) of |m| and |v| as COAT's two-level trees give them;
// every thread gets the results.
template <bool Expansion>
__device__ void group_stats(float m, float v, bool active, Stats& ms, Stats& vs) {
  __shared__ float warp_stats[4][kGroup / 32];  // m max, m min, v max, v min per warp
  __shared__ float block_stats[4];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float own[4] = {abs_of(m), active ? abs_of(m) : float_of(kFltMaxBits), abs_of(v), active ? abs_of(v) : float_of(kFltMaxBits)};
  for (int j = 0; j < 4; ++j) {
    if (!Expansion && j % 2) continue;
    own[j] = warp_tree(own[j], j % 2);
    if (lane == 0) warp_stats[j][warp] = own[j];
  }
  __syncthreads();
  if (warp == 0) {
    for (int j = 0; j < 4; ++j) {
      if (!Expansion && j % 2) continue;
      const float fill = j % 2 ? kBlockFillMin : 0.0f;
      const float top = warp_tree(lane < kGroup / 32 ? warp_stats[j][lane] : fill, j % 2);
      if (lane == 0) block_stats[j] = top;
    }
  }
  __syncthreads();
  ms = {block_stats[0], block_stats[1]};
  vs = {block_stats[2], block_stats[3]};
}

template <bool Expansion>
__global__ void __launch_bounds__(kGroup) coat_adamw_kernel(StepArgs a) {
  const uint64_t g = blockIdx.x, i = g * kGroup + threadIdx.x;
  const bool active = i < a.n;
  float m = 0.0f, v = 0.0f;
  if (active) {
    const StepScalars s = step_scalars(a.h, static_cast<float>(static_cast<int>(*a.step)));
    float m0, v0;
    if (Expansion) {
      m0 = expand_dequantize(a.m_in.codes[i], a.m_in.scale[g], a.m_in.expand[g], a.m_in.centre[g], false);
      v0 = expand_dequantize(a.v_in.codes[i], a.v_in.scale[g], a.v_in.expand[g], a.v_in.centre[g], true);
    } else {
      m0 = origin_dequantize(a.m_in.codes[i], a.m_in.scale[g]);
      v0 = origin_dequantize(a.v_in.codes[i], a.v_in.scale[g]);
    }
    const Moments next = adamw_update(m0, v0, a.grad[i], a.param[i], a.h, s, &a.param_next[i]);
    m = next.m;
    v = next.v;
  }
  Stats ms, vs;
  group_stats<Expansion>(m, v, active, ms, vs);
  if (Expansion) {
    const ExpandGroup qm = expand_group(ms.max, ms.min, a.h.expand_min), qv = expand_group(vs.max, vs.min, a.h.expand_min);
    if (active) {
      a.m_out.codes[i] = expand_code(m, qm, false);
      a.v_out.codes[i] = expand_code(v, qv, true);
    }
    if (threadIdx.x == 0) {
      a.m_out.scale[g] = qm.scale, a.m_out.expand[g] = qm.expand, a.m_out.centre[g] = qm.centre;
      a.v_out.scale[g] = qv.scale, a.v_out.expand[g] = qv.expand, a.v_out.centre[g] = qv.centre;
    }
  } else {
    const float sm = origin_scale(ms.max), sv = origin_scale(vs.max);
    if (active) {
      a.m_out.codes[i] = origin_code(m, sm);
      a.v_out.codes[i] = origin_code(v, sv);
    }
    if (threadIdx.x == 0) a.m_out.scale[g] = sm, a.v_out.scale[g] = sv;
  }
}

int32_t step_on_device(const StepArgs& a, bool expansion, char* error, uint64_t capacity) {
  const uint64_t groups = (a.n + kGroup - 1) / kGroup;
  if (groups > 0x7FFFFFFFull)
    return snprintf(error, capacity, "%llu groups: more than a grid holds", static_cast<unsigned long long>(groups)), 1;
  if (expansion)
    coat_adamw_kernel<true><<<static_cast<unsigned>(groups), kGroup>>>(a);
  else
    coat_adamw_kernel<false><<<static_cast<unsigned>(groups), kGroup>>>(a);
  // a launch error lives in this library's CUDA runtime only: the harness cannot see it, so say it here
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return snprintf(error, capacity, "launching the COAT AdamW kernel: %s", cudaGetErrorString(e)), 1;
  return 0;  // the kernel may still be running: the harness synchronizes
}

int32_t run_origin(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
                   uint64_t capacity) {
  return run_coat_step(step_on_device, false, in, n_in, params, out, n_out, error, capacity);
}
int32_t run_expand(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
                   uint64_t capacity) {
  return run_coat_step(step_on_device, true, in, n_in, params, out, n_out, error, capacity);
}

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  static const lowbit_kernel kernels[] = {
      {"cuda.coat.optim.origin.e4m3", "coat.optim.origin.e4m3", LOWBIT_MEMORY_CUDA, run_origin},
      {"cuda.coat.optim.expand.e4m3", "coat.optim.expand.e4m3", LOWBIT_MEMORY_CUDA, run_expand},
  };
  static const lowbit_plugin plugin = {LOWBIT_PLUGIN_ABI_VERSION, sizeof kernels / sizeof kernels[0], kernels};
  return &plugin;
}
