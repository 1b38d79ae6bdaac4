// The host twin of bnb_one_state_plugin.cu: the same per-slot functions (bnb_one_state_cuda.cuh) and
// glue (bnb_one_state_glue.hpp), run block by block on the CPU as a host-memory kernel, so that
// `lowbit verify` proves the CUDA kernel's arithmetic on every machine. What the device adds is one
// thread per slot and the block's maximum through shared memory (exact, in any order: no NaN reaches it).
#include "bnb_one_state_glue.hpp"

namespace {

using namespace lowbit_kernels;
using namespace lowbit_kernels::bnb_one_state;

int32_t step_on_host(const StepArgs& a, char*, uint64_t) {
  const int64_t step = *a.step;
  for (uint64_t b = 0, start = 0; start < a.n; ++b, start += kBlock) {
    Slot slots[kBlock];
    float absmax = float_of(kNegFltMaxBits);
    for (unsigned j = 0; j < kBlock; ++j) {  // every slot, the tail's padding included
      const uint64_t i = start + j;
      const bool real = i < a.n;
      const float s0 = mul_rn(a.qmap[real ? a.codes[i] : kPadCode], a.scale[b]);
      slots[j] = slot(a.rule, real ? a.param[i] : 0.0f, real ? a.grad[i] : 0.0f, s0, step, a.s);
      absmax = amax_step(absmax, slots[j].state);
    }
    a.scale_next[b] = absmax;
    for (unsigned j = 0; j < kBlock && start + j < a.n; ++j) {
      a.param_next[start + j] = slots[j].param;
      a.codes_next[start + j] = code(slots[j].state, absmax, a.qmap);
    }
  }
  return 0;
}

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  static const char* const names[] = {"host-twin.bnb.lion8bit.cuda", "host-twin.bnb.momentum8bit.cuda",
                                      "host-twin.bnb.rmsprop8bit.cuda", "host-twin.bnb.adagrad8bit.cuda"};
  return lowbit_kernels::bnb_one_state::plugin_of<step_on_host>(names, LOWBIT_MEMORY_HOST);
}
