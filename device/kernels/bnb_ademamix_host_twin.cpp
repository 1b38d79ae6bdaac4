// The host twin of bnb_ademamix_plugin.cu: the same functions (bnb_ademamix_cuda.cuh) and glue
// (bnb_ademamix_glue.hpp), run block by block on the CPU as a host-memory kernel, so that `lowbit verify`
// proves the CUDA kernel's arithmetic on every machine. What the device adds is one thread per slot and
// the blocks' maxima through shared memory (exact, in any order: no NaN reaches them).
#include "bnb_ademamix_glue.hpp"

namespace {

using namespace lowbit_kernels;
using namespace lowbit_kernels::bnb_ademamix;

float dequantized(const StateArgs& s, uint64_t i, uint64_t b) { return mul_rn(s.qmap[s.codes[i]], s.scale[b]); }

int32_t step_on_host(const StepArgs& a, char* error, uint64_t capacity) {
  const int64_t step = *a.step;
  if (step < 1 || step > 0x7FFFFFFF) return snprintf(error, capacity, "step %lld is no int32 >= 1", static_cast<long long>(step)), 1;
  const Scalars s = scalars(a.h, static_cast<int32_t>(step));
  for (uint64_t b = 0, start = 0; start < a.n; ++b, start += kBlock) {
    Moments m[kBlock];
    float max1 = float_of(kNegFltMaxBits), max2 = max1, max3 = max1;
    for (unsigned j = 0; j < kBlock; ++j) {
      const uint64_t i = start + j;
      m[j] = moments(a.grad[i], {dequantized(a.m1, i, b), dequantized(a.m2, i, b), dequantized(a.nu, i, b)}, s);
      max1 = amax_step(max1, m[j].m1);
      max2 = amax_step(max2, m[j].m2);
      max3 = amax_step(max3, m[j].nu);
    }
    a.m1.scale_next[b] = max1;
    a.m2.scale_next[b] = max2;
    a.nu.scale_next[b] = max3;
    for (unsigned j = 0; j < kBlock; ++j) {
      const uint64_t i = start + j;
      a.param_next[i] = parameter(a.param[i], a.grad[i], m[j], s);
      a.m1.codes_next[i] = code(m[j].m1, max1, a.m1.qmap);
      a.m2.codes_next[i] = code(m[j].m2, max2, a.m2.qmap);
      a.nu.codes_next[i] = search(div_rn(m[j].nu, max3), a.nu.qmap);
    }
  }
  return 0;
}

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  return lowbit_kernels::bnb_ademamix::plugin_of<step_on_host>("host-twin.bnb.ademamix8bit.cuda", LOWBIT_MEMORY_HOST);
}
