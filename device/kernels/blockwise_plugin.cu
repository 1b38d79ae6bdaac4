// Our CUDA kernels of the block-wise formats, over the plugin ABI (LOWBIT_MEMORY_CUDA), bit for bit
// the CPU reference: torchao.codebook8/4.signed/unsigned, torchao.fp8, and bnb.blockwise8.dynamic/linear
// with the CPU back end's lookup (the formats' default). The per-element arithmetic is in
// torchao_blockwise.cuh and bnb_cpu_lut.cuh, shared with the host twin (blockwise_host_twin.cpp) that
// lowbit verify checks on every machine; this file adds the parallel structure only.
//
// One thread block per quantization block, up to 256 threads (a multiple of 32, fewer for smaller
// blocks), each thread taking every 256th element of the block: the block's absmax (NaN ignored) and
// first NaN index reduce through warp shuffles and one shared-memory step across the warps (max and min
// are exact and order-free: any order gives the reference's values), then each thread writes its codes
// and dequantized values. Codebook tables live in shared memory. 4-bit codes are paired through a warp
// shuffle (an odd block size packs in a second pass). bitsandbytes' lookup table is not built: a setup
// kernel turns the qmap into the table's 255 step positions (bnb_cpu_lut.cuh says why that is the table).
//
// Built with LOWBIT_KERNELS_MUTANT_TIES_DOWN it is the mutant (torchao's search with ties down), which
// verify must catch. Kernels launch on the legacy default stream; the harness synchronizes. The plugin
// also exports lowbit_blockwise_bench_v1 (a plain copy kernel and an input filler) for the bandwidth
// check of lowbit-gpu-checks, so that the copy runs from the same module and compiler flags.
#include <cuda_runtime.h>

#include "blockwise_bench.h"
#include "blockwise_glue.hpp"
#include "bnb_cpu_lut.cuh"
#include "torchao_blockwise.cuh"

namespace {

using namespace lowbit_kernels;

constexpr unsigned kMaxThreads = 256;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr unsigned long long kNoNan = ~0ull;

// Threads for a block of `block` elements: the block rounded up to a warp, at most 256.
unsigned threads_for(uint64_t block) {
  return block >= kMaxThreads ? kMaxThreads : static_cast<unsigned>((block + 31) / 32 * 32);
}

// Every thread's partial absmax and first NaN index, reduced over the thread block; every thread gets
// the result. Includes a __syncthreads (after which shared tables loaded before it are visible).
__device__ void block_reduce(float& amax, unsigned long long& nan_at) {
  __shared__ float warp_amax[kMaxThreads / 32];
  __shared__ unsigned long long warp_nan[kMaxThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) {
    amax = amax_step(amax, __shfl_xor_sync(kFullMask, amax, offset));
    const unsigned long long other = __shfl_xor_sync(kFullMask, nan_at, offset);
    nan_at = other < nan_at ? other : nan_at;
  }
  if (threadIdx.x % 32 == 0) {
    warp_amax[threadIdx.x / 32] = amax;
    warp_nan[threadIdx.x / 32] = nan_at;
  }
  __syncthreads();
  amax = warp_amax[0];
  nan_at = warp_nan[0];
  for (unsigned w = 1; w < blockDim.x / 32; ++w) {
    amax = amax_step(amax, warp_amax[w]);
    nan_at = warp_nan[w] < nan_at ? warp_nan[w] : nan_at;
  }
}

// The thread's share of a block's absmax and first NaN.
__device__ void partial_max(const float* x, uint64_t start, uint64_t end, float& amax, unsigned long long& nan_at) {
  amax = 0.0f;
  nan_at = kNoNan;
  for (uint64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    const float v = x[i];
    amax = amax_step(amax, v);
    if (is_nan(v) && i < nan_at) nan_at = i;
  }
}

__global__ void __launch_bounds__(kMaxThreads) torchao_codebook_kernel(CodebookArgs a) {
  __shared__ float q[256];
  for (unsigned k = threadIdx.x; k < a.qmap_size; k += blockDim.x) q[k] = a.qmap[k];
  const uint64_t start = static_cast<uint64_t>(blockIdx.x) * a.block, end = start + a.block;
  float amax;
  unsigned long long nan_at;
  partial_max(a.x, start, end, amax, nan_at);
  block_reduce(amax, nan_at);
  const bool has_nan = nan_at != kNoNan;
  const float s = torchao::codebook_scale(amax, has_nan, has_nan ? a.x[nan_at] : 0.0f);
  if (threadIdx.x == 0) a.scale[blockIdx.x] = s;
  // with an even block every pair (2j, 2j+1) sits in lanes (2k, 2k+1) of one warp
  const bool pairs_in_warp = a.packed && a.block % 2 == 0;
  const uint64_t rounds = (a.block + blockDim.x - 1) / blockDim.x;
  for (uint64_t r = 0; r < rounds; ++r) {
    const uint64_t i = start + r * blockDim.x + threadIdx.x;
    const bool active = i < end;
    uint8_t c = 0;
    if (active) {
      c = torchao::codebook_code(a.x[i], s, q, a.qmap_size);
      a.codes[i] = c;
      a.dequant[i] = torchao::codebook_dequant(c, s, q);
    }
    if (pairs_in_warp) {
      const unsigned next = __shfl_down_sync(kFullMask, static_cast<unsigned>(c), 1);
      if (active && threadIdx.x % 2 == 0) a.packed[i / 2] = torchao::pack_pair(c, static_cast<uint8_t>(next));
    }
  }
}

// Packing for an odd block size, from the codes written: byte j of codes 2j and 2j + 1.
__global__ void pack_kernel(const uint8_t* codes, uint8_t* packed, uint64_t pairs) {
  for (uint64_t j = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; j < pairs;
       j += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    packed[j] = torchao::pack_pair(codes[2 * j], codes[2 * j + 1]);
}

__global__ void __launch_bounds__(kMaxThreads) torchao_fp8_kernel(Fp8Args a) {
  const uint64_t start = static_cast<uint64_t>(blockIdx.x) * a.block, end = start + a.block;
  float amax;
  unsigned long long nan_at;
  partial_max(a.x, start, end, amax, nan_at);
  block_reduce(amax, nan_at);
  const bool has_nan = nan_at != kNoNan;
  const float s = torchao::fp8_scale(amax, has_nan, has_nan ? a.x[nan_at] : 0.0f);
  if (threadIdx.x == 0) a.scale[blockIdx.x] = s;
  const torchao::Fp8Cast cast{a.saturate, a.nan_keeps_sign};
  for (uint64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    const uint8_t c = torchao::fp8_code(a.x[i], s, cast);
    a.codes[i] = c;
    a.dequant[i] = torchao::fp8_dequant(c, s, a.nan_bits, i, a.block, a.n);
  }
}

// bitsandbytes' table as its 255 step positions, made from the qmap by bnb_setup_kernel before each
// bnb_kernel launch on the same stream (one case at a time: the harness calls run() serially).
__device__ uint32_t g_bnb_first[bnb::kMidpoints];

__global__ void bnb_setup_kernel(const float* qmap) {
  __shared__ float prefix[bnb::kMidpoints];
  if (threadIdx.x == 0) {
    float p = -__int_as_float(0x7F800000);
    for (uint32_t c = 0; c < bnb::kMidpoints; ++c) prefix[c] = p = bnb::prefix_step(p, bnb::midpoint(qmap[c], qmap[c + 1]));
  }
  __syncthreads();
  if (threadIdx.x < bnb::kMidpoints) g_bnb_first[threadIdx.x] = bnb::first_index(prefix[threadIdx.x]);
}

__global__ void __launch_bounds__(kMaxThreads) bnb_kernel(BnbArgs a) {
  __shared__ float q[256];
  __shared__ uint32_t first[bnb::kMidpoints];
  for (unsigned k = threadIdx.x; k < 256; k += blockDim.x) {
    q[k] = a.qmap[k];
    if (k < bnb::kMidpoints) first[k] = g_bnb_first[k];
  }
  const uint64_t start = static_cast<uint64_t>(blockIdx.x) * a.block;
  const uint64_t end = start + a.block < a.n ? start + a.block : a.n;  // the last block may be partial
  float absmax;
  unsigned long long nan_at;  // not needed: the CPU back end ignores NaN
  partial_max(a.x, start, end, absmax, nan_at);
  block_reduce(absmax, nan_at);
  if (threadIdx.x == 0) a.scale[blockIdx.x] = absmax;
  const float inverse = bnb::reciprocal(absmax);
  for (uint64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    const uint8_t c = bnb::code(a.x[i], absmax, inverse, first);
    a.codes[i] = c;
    a.dequant[i] = bnb::dequant(c, absmax, q);
  }
}

// A launch error lives in this library's CUDA runtime only: the harness cannot see it, so say it here.
int32_t launched(const char* what, char* error, uint64_t capacity) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return snprintf(error, capacity, "launching %s: %s", what, cudaGetErrorString(e)), 1;
  return 0;
}

bool grid_fits(uint64_t blocks, char* error, uint64_t capacity) {
  if (blocks <= 0x7FFFFFFFull) return true;
  snprintf(error, capacity, "%llu blocks: more than a grid holds", static_cast<unsigned long long>(blocks));
  return false;
}

int32_t codebook_on_device(const CodebookArgs& a, char* error, uint64_t capacity) {
  const uint64_t blocks = a.n / a.block;
  if (!grid_fits(blocks, error, capacity)) return 1;
  torchao_codebook_kernel<<<static_cast<unsigned>(blocks), threads_for(a.block)>>>(a);
  if (launched("the torchao codebook kernel", error, capacity)) return 1;
  if (a.packed && a.block % 2) {
    pack_kernel<<<1024, 256>>>(a.codes, a.packed, a.n / 2);
    return launched("the packing kernel", error, capacity);
  }
  return 0;  // the kernel may still be running: the harness synchronizes
}

int32_t fp8_on_device(const Fp8Args& a, char* error, uint64_t capacity) {
  const uint64_t blocks = a.n / a.block;
  if (!grid_fits(blocks, error, capacity)) return 1;
  torchao_fp8_kernel<<<static_cast<unsigned>(blocks), threads_for(a.block)>>>(a);
  return launched("the torchao fp8 kernel", error, capacity);
}

int32_t bnb_on_device(const BnbArgs& a, char* error, uint64_t capacity) {
  const uint64_t blocks = (a.n + a.block - 1) / a.block;
  if (!grid_fits(blocks, error, capacity)) return 1;
  bnb_setup_kernel<<<1, 256>>>(a.qmap);
  if (launched("the bitsandbytes table kernel", error, capacity)) return 1;
  bnb_kernel<<<static_cast<unsigned>(blocks), threads_for(a.block)>>>(a);
  return launched("the bitsandbytes kernel", error, capacity);
}

constexpr Computes kDevice{codebook_on_device, fp8_on_device, bnb_on_device};

int32_t run_codebook8(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out,
                      char* error, uint64_t capacity) {
  return run_torchao_codebook(kDevice, 8, in, n_in, params, out, n_out, error, capacity);
}
int32_t run_codebook4(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out,
                      char* error, uint64_t capacity) {
  return run_torchao_codebook(kDevice, 4, in, n_in, params, out, n_out, error, capacity);
}
int32_t run_fp8(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
                uint64_t capacity) {
  return run_torchao_fp8(kDevice, in, n_in, params, out, n_out, error, capacity);
}
int32_t run_bnb_cpu(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out,
                    char* error, uint64_t capacity) {
  return run_bnb(kDevice, in, n_in, params, out, n_out, error, capacity);
}

// ---- the bandwidth check's yardstick (blockwise_bench.h) ------------------------------------------

// A plain copy, four floats a thread per step where the pointers allow (cudaMalloc aligns to 256 bytes).
__global__ void copy_kernel(const float* __restrict__ in, float* __restrict__ out, uint64_t n) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t quads = n / 4;
  const float4* in4 = reinterpret_cast<const float4*>(in);
  float4* out4 = reinterpret_cast<float4*>(out);
  for (uint64_t j = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; j < quads; j += stride) out4[j] = in4[j];
  for (uint64_t i = 4 * quads + blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) out[i] = in[i];
}

// Deterministic inputs: a hash of the index, as a float of magnitude 2^-20 .. 2^3 with either sign (and
// an exact zero now and then), so that every search and cast does real work.
__global__ void fill_kernel(float* out, uint64_t n, uint32_t seed) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ static_cast<uint32_t>(i >> 32) ^ seed;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    h *= 0x297A2D39u;
    h ^= h >> 15;
    const uint32_t exponent = 107u + (h >> 27) % 24u;  // 2^-20 .. 2^3
    out[i] = (h & 0xFFu) == 0 ? 0.0f : __uint_as_float((h & 0x80000000u) | (exponent << 23) | (h & 0x7FFFFFu));
  }
}

int32_t bench_copy(const float* in, float* out, uint64_t n, char* error, uint64_t capacity) {
  // a grid-stride loop over 8 blocks of 256 threads per multiprocessor: enough loads in flight to
  // saturate the memory system (NVIDIA's usual recipe for a bandwidth-bound kernel)
  int multiprocessors = 0;
  if (cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || multiprocessors < 1)
    multiprocessors = 132;
  copy_kernel<<<8 * multiprocessors, 256>>>(in, out, n);
  return launched("the copy kernel", error, capacity);
}

int32_t bench_fill(float* out, uint64_t n, uint32_t seed, char* error, uint64_t capacity) {
  fill_kernel<<<4096, 256>>>(out, n, seed);
  return launched("the fill kernel", error, capacity);
}

#ifdef LOWBIT_KERNELS_MUTANT_TIES_DOWN
#define KERNEL_NAME(format) "cuda.ties-down." format
#else
#define KERNEL_NAME(format) "cuda." format
#endif

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  static const lowbit_kernel kernels[] = {
      {KERNEL_NAME("torchao.codebook8.signed"), "torchao.codebook8.signed", LOWBIT_MEMORY_CUDA, run_codebook8},
      {KERNEL_NAME("torchao.codebook8.unsigned"), "torchao.codebook8.unsigned", LOWBIT_MEMORY_CUDA, run_codebook8},
      {KERNEL_NAME("torchao.codebook4.signed"), "torchao.codebook4.signed", LOWBIT_MEMORY_CUDA, run_codebook4},
      {KERNEL_NAME("torchao.codebook4.unsigned"), "torchao.codebook4.unsigned", LOWBIT_MEMORY_CUDA, run_codebook4},
      {KERNEL_NAME("torchao.fp8"), "torchao.fp8", LOWBIT_MEMORY_CUDA, run_fp8},
      {KERNEL_NAME("bnb.blockwise8.dynamic"), "bnb.blockwise8.dynamic", LOWBIT_MEMORY_CUDA, run_bnb_cpu},
      {KERNEL_NAME("bnb.blockwise8.linear"), "bnb.blockwise8.linear", LOWBIT_MEMORY_CUDA, run_bnb_cpu},
  };
  static const lowbit_plugin plugin = {LOWBIT_PLUGIN_ABI_VERSION, sizeof kernels / sizeof kernels[0], kernels};
  return &plugin;
}

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_blockwise_bench* lowbit_blockwise_bench_v1(void) {
  static const lowbit_blockwise_bench bench = {bench_copy, bench_fill};
  return &bench;
}
