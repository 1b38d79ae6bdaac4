// The host twin of blockwise_plugin.cu: the same per-element functions (torchao_blockwise.cuh,
// bnb_cpu_lut.cuh) and the same glue, run block by block on the CPU as host-memory kernels, so that
// `lowbit verify` proves the CUDA kernels' arithmetic on every machine (the device adds only the
// parallel reductions, whose max and first-NaN index are order-free, and the indexing). Built with
// LOWBIT_KERNELS_MUTANT_TIES_DOWN, the twin of the CUDA mutant (torchao's search with ties down).
#include "blockwise_glue.hpp"
#include "bnb_cpu_lut.cuh"
#include "torchao_blockwise.cuh"

namespace {

using namespace lowbit_kernels;

// A block's NaN-ignoring absmax and its first NaN, as the device's reduction gives them.
struct BlockMax {
  float amax = 0.0f;
  bool has_nan = false;
  float first_nan = 0.0f;
};

BlockMax block_max(const float* x, uint64_t start, uint64_t end) {
  BlockMax m;
  for (uint64_t i = start; i < end; ++i) {
    m.amax = amax_step(m.amax, x[i]);
    if (!m.has_nan && is_nan(x[i])) m.has_nan = true, m.first_nan = x[i];
  }
  return m;
}

int32_t codebook_on_host(const CodebookArgs& a, char*, uint64_t) {
  for (uint64_t b = 0, start = 0; start < a.n; ++b, start += a.block) {
    const BlockMax m = block_max(a.x, start, start + a.block);
    const float s = torchao::codebook_scale(m.amax, m.has_nan, m.first_nan);
    a.scale[b] = s;
    for (uint64_t i = start; i < start + a.block; ++i) {
      a.codes[i] = torchao::codebook_code(a.x[i], s, a.qmap, a.qmap_size);
      a.dequant[i] = torchao::codebook_dequant(a.codes[i], s, a.qmap);
    }
  }
  if (a.packed)
    for (uint64_t j = 0; j < a.n / 2; ++j) a.packed[j] = torchao::pack_pair(a.codes[2 * j], a.codes[2 * j + 1]);
  return 0;
}

int32_t fp8_on_host(const Fp8Args& a, char*, uint64_t) {
  const torchao::Fp8Cast cast{a.saturate, a.nan_keeps_sign};
  for (uint64_t b = 0, start = 0; start < a.n; ++b, start += a.block) {
    const BlockMax m = block_max(a.x, start, start + a.block);
    const float s = torchao::fp8_scale(m.amax, m.has_nan, m.first_nan);
    a.scale[b] = s;
    for (uint64_t i = start; i < start + a.block; ++i) {
      a.codes[i] = torchao::fp8_code(a.x[i], s, cast);
      a.dequant[i] = torchao::fp8_dequant(a.codes[i], s, a.nan_bits, i, a.block, a.n);
    }
  }
  return 0;
}

int32_t bnb_on_host(const BnbArgs& a, char*, uint64_t) {
  uint32_t first[bnb::kMidpoints];
  float p = -__builtin_huge_valf();
  for (uint32_t c = 0; c < bnb::kMidpoints; ++c) {
    p = bnb::prefix_step(p, bnb::midpoint(a.qmap[c], a.qmap[c + 1]));
    first[c] = bnb::first_index(p);
  }
  for (uint64_t b = 0, start = 0; start < a.n; ++b, start += a.block) {
    const uint64_t end = start + a.block < a.n ? start + a.block : a.n;
    const float absmax = block_max(a.x, start, end).amax;
    const float inverse = bnb::reciprocal(absmax);
    a.scale[b] = absmax;
    for (uint64_t i = start; i < end; ++i) {
      a.codes[i] = bnb::code(a.x[i], absmax, inverse, first);
      a.dequant[i] = bnb::dequant(a.codes[i], absmax, a.qmap);
    }
  }
  return 0;
}

constexpr Computes kHost{codebook_on_host, fp8_on_host, bnb_on_host};

int32_t run_codebook8(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out,
                      char* error, uint64_t capacity) {
  return run_torchao_codebook(kHost, 8, in, n_in, params, out, n_out, error, capacity);
}
int32_t run_codebook4(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out,
                      char* error, uint64_t capacity) {
  return run_torchao_codebook(kHost, 4, in, n_in, params, out, n_out, error, capacity);
}
int32_t run_fp8(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
                uint64_t capacity) {
  return run_torchao_fp8(kHost, in, n_in, params, out, n_out, error, capacity);
}
int32_t run_bnb_cpu(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out,
                    char* error, uint64_t capacity) {
  return run_bnb(kHost, in, n_in, params, out, n_out, error, capacity);
}

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  static const lowbit_kernel kernels[] = {
      {"host-twin.torchao.codebook8.signed", "torchao.codebook8.signed", LOWBIT_MEMORY_HOST, run_codebook8},
      {"host-twin.torchao.codebook8.unsigned", "torchao.codebook8.unsigned", LOWBIT_MEMORY_HOST, run_codebook8},
      {"host-twin.torchao.codebook4.signed", "torchao.codebook4.signed", LOWBIT_MEMORY_HOST, run_codebook4},
      {"host-twin.torchao.codebook4.unsigned", "torchao.codebook4.unsigned", LOWBIT_MEMORY_HOST, run_codebook4},
      {"host-twin.torchao.fp8", "torchao.fp8", LOWBIT_MEMORY_HOST, run_fp8},
      {"host-twin.bnb.blockwise8.dynamic", "bnb.blockwise8.dynamic", LOWBIT_MEMORY_HOST, run_bnb_cpu},
      {"host-twin.bnb.blockwise8.linear", "bnb.blockwise8.linear", LOWBIT_MEMORY_HOST, run_bnb_cpu},
  };
  static const lowbit_plugin plugin = {LOWBIT_PLUGIN_ABI_VERSION, sizeof kernels / sizeof kernels[0], kernels};
  return &plugin;
}
