// The GPU's approximate reciprocal and division, measured (gpu_kernels.hpp): MUFU.RCP through the
// PTX rcp.approx.ftz.f32 that libdevice's powf uses, and div.full.f32, which Triton emits for an
// fp32 division, against the model docs/formats/coat-activation.md states for it.
#include "gpu_kernels.hpp"
#include "lowbit/cuda_libdevice.hpp"

namespace lowbit::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kBlocks = 132 * 16;

__device__ float rcp_approx(float b) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b));
  return r;
}

__device__ float div_full(float a, float b) {
  float q;
  asm("div.full.f32 %0, %1, %2;" : "=f"(q) : "f"(a), "f"(b));
  return q;
}

__device__ std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// rcp.approx.ftz of x predicted from the measured results on [1, 2) by the reference's own rule.
__device__ unsigned predicted_rcp(unsigned x, const std::uint32_t* table) {
  return cuda::rcp_approx_ftz_scaled_bits(x, table[x & 0x007FFFFFu]);
}

__global__ void rcp_kernel(std::uint32_t* out, std::uint64_t first, std::uint64_t count) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += std::uint64_t{gridDim.x} * blockDim.x)
    out[i] = __float_as_uint(rcp_approx(__uint_as_float(static_cast<unsigned>(first + i))));
}

__global__ void rcp_scaling_kernel(const std::uint32_t* table, unsigned long long* counts, std::uint32_t* first,
                                   std::uint32_t cap) {
  const std::uint64_t all = std::uint64_t{1} << 32;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < all;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const unsigned x = static_cast<unsigned>(i);
    if (__float_as_uint(rcp_approx(__uint_as_float(x))) == predicted_rcp(x, table)) continue;
    const unsigned long long k = atomicAdd(&counts[0], 1ull);
    if (k < cap) first[k] = x;
  }
}

__device__ float random_float(std::uint64_t bits, int min_exp, int max_exp) {
  const unsigned span = static_cast<unsigned>(max_exp - min_exp + 1);
  const unsigned exponent = static_cast<unsigned>(min_exp + 127) + static_cast<unsigned>((bits >> 32) % span);
  const unsigned sign = static_cast<unsigned>(bits >> 31) & 0x80000000u;
  return __uint_as_float(sign | exponent << 23 | (static_cast<unsigned>(bits) & 0x007FFFFFu));
}

__global__ void div_full_kernel(std::uint64_t n, std::uint64_t seed, int min_exp, int max_exp,
                                unsigned long long* counts, std::uint32_t* first, std::uint32_t cap) {
  unsigned long long pairs = 0;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const float a = random_float(splitmix64(seed ^ (2 * i)), min_exp, max_exp);
    const float b = random_float(splitmix64(seed ^ (2 * i + 1)), min_exp, max_exp);
    ++pairs;
    const float q = div_full(a, b);
    const float model = __fmul_rn(a, rcp_approx(b));
    if (__float_as_uint(q) == __float_as_uint(model)) continue;
    const unsigned long long k = atomicAdd(&counts[1], 1ull);
    if (k < cap) {
      first[4 * k] = __float_as_uint(a);
      first[4 * k + 1] = __float_as_uint(b);
      first[4 * k + 2] = __float_as_uint(q);
      first[4 * k + 3] = __float_as_uint(model);
    }
  }
  atomicAdd(&counts[0], pairs);
}

}  // namespace

void rcp_approx_ftz(std::uint32_t* out, std::uint64_t first, std::uint64_t count) {
  rcp_kernel<<<kBlocks, kThreads>>>(out, first, count);
}
void check_rcp_scaling(const std::uint32_t* table, unsigned long long* counts, std::uint32_t* first, std::uint32_t cap) {
  rcp_scaling_kernel<<<kBlocks, kThreads>>>(table, counts, first, cap);
}
void check_div_full(std::uint64_t n, std::uint64_t seed, int min_exp, int max_exp, unsigned long long* counts,
                    std::uint32_t* first, std::uint32_t cap) {
  div_full_kernel<<<kBlocks, kThreads>>>(n, seed, min_exp, max_exp, counts, first, cap);
}

}  // namespace lowbit::gpu
