// The host twin of coat_plugin.cu: the same per-element and per-group functions (coat_adamw.cuh) and
// the same glue (coat_glue.hpp), run group by group on the CPU as host-memory kernels, so that
// `lowbit verify` proves the CUDA kernels' arithmetic on every machine. What the device adds is the
// indexing and the shuffle trees; the trees are emulated here lane by lane (a __shfl_down_sync gives
// lane l the value of lane l + offset, its own when that is past lane 31), with the same combining
// functions, because the expansion kernel's minimum depends on the order (coat_adamw.cuh
// combine_min). powf and log2f are the reference's models of CUDA's (coat_libdevice.cuh), so this
// library links the reference's arithmetic library for them alone.
//
// Built with LOWBIT_KERNELS_MUTANT_CENTRE_ONE_SQRT it is a mutant (the expansion's centre as
// sqrt(A B), the pre-fix kernels' formula), which verify must catch.
#include <algorithm>

#include "coat_glue.hpp"

namespace {

using namespace lowbit_kernels;
using namespace lowbit_kernels::coat;

// One warp's shuffle-down tree (offsets 16, 8, 4, 2, 1); returns lane 0's value.
float warp_tree(float (&lane)[32], float (*combine)(float, float)) {
  for (int offset = 16; offset >= 1; offset /= 2) {
    float before[32];
    std::copy(lane, lane + 32, before);
    for (int l = 0; l < 32; ++l) lane[l] = combine(before[l], before[l + offset < 32 ? l + offset : l]);
  }
  return lane[0];
}

// The kernel's two levels: four warps of 32 threads (thread t holds own[t]), then lanes 0-3 of warp 0
// over the warp results with `fill` in lanes 4-31.
float block_tree(const float (&own)[kGroup], float fill, float (*combine)(float, float)) {
  float top[32];
  std::fill(top, top + 32, fill);
  for (unsigned w = 0; w < kGroup / 32; ++w) {
    float lane[32];
    std::copy(own + 32 * w, own + 32 * w + 32, lane);
    top[w] = warp_tree(lane, combine);
  }
  return warp_tree(top, combine);
}

struct Stats {
  float max, min;
};

// A group's statistics from its new moment values (count <= 128; the rest are padding threads: max 0,
// min FLT_MAX).
Stats group_stats(const float* x, unsigned count) {
  float own_max[kGroup], own_min[kGroup];
  for (unsigned t = 0; t < kGroup; ++t) {
    own_max[t] = t < count ? abs_of(x[t]) : 0.0f;
    own_min[t] = t < count ? abs_of(x[t]) : float_of(kFltMaxBits);
  }
  return {block_tree(own_max, 0.0f, combine_max), block_tree(own_min, kBlockFillMin, combine_min)};
}

int32_t step_on_host(const StepArgs& a, bool expansion, char*, uint64_t) {
  const StepScalars s = step_scalars(a.h, static_cast<float>(static_cast<int>(*a.step)));
  for (uint64_t g = 0, start = 0; start < a.n; ++g, start += kGroup) {
    const unsigned count = static_cast<unsigned>(std::min<uint64_t>(kGroup, a.n - start));
    float m[kGroup], v[kGroup];
    for (unsigned t = 0; t < count; ++t) {
      const uint64_t i = start + t;
      const float m0 = expansion ? expand_dequantize(a.m_in.codes[i], a.m_in.scale[g], a.m_in.expand[g], a.m_in.centre[g], false)
                                 : origin_dequantize(a.m_in.codes[i], a.m_in.scale[g]);
      const float v0 = expansion ? expand_dequantize(a.v_in.codes[i], a.v_in.scale[g], a.v_in.expand[g], a.v_in.centre[g], true)
                                 : origin_dequantize(a.v_in.codes[i], a.v_in.scale[g]);
      const Moments next = adamw_update(m0, v0, a.grad[i], a.param[i], a.h, s, &a.param_next[i]);
      m[t] = next.m;
      v[t] = next.v;
    }
    for (int k = 0; k < 2; ++k) {
      const float* x = k == 0 ? m : v;
      const MomentOut& o = k == 0 ? a.m_out : a.v_out;
      const Stats st = group_stats(x, count);
      if (expansion) {
        const ExpandGroup q = expand_group(st.max, st.min, a.h.expand_min);
        o.scale[g] = q.scale;
        o.expand[g] = q.expand;
        o.centre[g] = q.centre;
        for (unsigned t = 0; t < count; ++t) o.codes[start + t] = expand_code(x[t], q, k == 1);
      } else {
        const float scale = origin_scale(st.max);
        o.scale[g] = scale;
        for (unsigned t = 0; t < count; ++t) o.codes[start + t] = origin_code(x[t], scale);
      }
    }
  }
  return 0;
}

int32_t run_origin(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
                   uint64_t capacity) {
  return run_coat_step(step_on_host, false, in, n_in, params, out, n_out, error, capacity);
}
int32_t run_expand(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
                   uint64_t capacity) {
  return run_coat_step(step_on_host, true, in, n_in, params, out, n_out, error, capacity);
}

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  static const lowbit_kernel kernels[] = {
      {"host-twin.coat.optim.origin.e4m3", "coat.optim.origin.e4m3", LOWBIT_MEMORY_HOST, run_origin},
      {"host-twin.coat.optim.expand.e4m3", "coat.optim.expand.e4m3", LOWBIT_MEMORY_HOST, run_expand},
  };
  static const lowbit_plugin plugin = {LOWBIT_PLUGIN_ABI_VERSION, sizeof kernels / sizeof kernels[0], kernels};
  return &plugin;
}
