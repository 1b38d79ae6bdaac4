// The host twin of cuda_perblock_plugin.cu: the same per-element arithmetic (perblock_e4m3.cuh) and the
// same glue, run by a loop on the CPU as a host-memory kernel, so that verify checks the CUDA kernel's
// arithmetic on every machine (the device adds only the block reduction and the indexing). With
// PERBLOCK_MUTANT_RECIPROCAL, the twin of the CUDA mutant, which verify must catch here too.
#include "perblock_e4m3.cuh"
#include "perblock_glue.hpp"

namespace {

int32_t compute_on_host(const float* x, uint64_t n, uint64_t block, uint8_t* codes, float* scale, float* dequant, char*,
                        uint64_t) {
  for (uint64_t b = 0, start = 0; start < n; ++b, start += block) {
    const uint64_t end = start + block < n ? start + block : n;
    float amax = 0.0f;
    for (uint64_t i = start; i < end; ++i) amax = perblock::amax_step(amax, x[i]);
    const float s = perblock::scale_of(amax);
    scale[b] = s;
    for (uint64_t i = start; i < end; ++i) {
      codes[i] = perblock::code_of(x[i], s);
      dequant[i] = perblock::dequant_of(codes[i], s);
    }
  }
  return 0;
}

int32_t run(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
            uint64_t capacity) {
  return perblock::run(compute_on_host, in, n_in, params, out, n_out, error, capacity);
}

#ifdef PERBLOCK_MUTANT_RECIPROCAL
const char* const kName = "host-twin.fp8.perblock.e4m3.reciprocal";
#else
const char* const kName = "host-twin.fp8.perblock.e4m3";
#endif
// PERBLOCK_DECLARES_CUDA: the twin declares CUDA memory (its data is host memory all the same), to run
// verify's CUDA path through the fake runner (fake_cuda_runner.cpp) where there is no GPU.
#ifdef PERBLOCK_DECLARES_CUDA
constexpr int32_t kMemory = LOWBIT_MEMORY_CUDA;
#else
constexpr int32_t kMemory = LOWBIT_MEMORY_HOST;
#endif

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  static const lowbit_kernel kernels[] = {{kName, "fp8.perblock.e4m3", kMemory, run}};
  static const lowbit_plugin plugin = {LOWBIT_PLUGIN_ABI_VERSION, 1, kernels};
  return &plugin;
}
