#include "lowbit/blockwise.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

namespace lowbit::blockwise {

namespace {

constexpr float kTorchaoScaleFloor = 1e-12f;  // f32(1e-12) = 0x2B8CBCCC, torch's clip(1e-12)
constexpr float kE4M3Max = fp8::E4M3FN::max_value;  // torch.finfo(float8_e4m3fn).max: 448

void require_whole_blocks(std::size_t n, std::size_t block_size) {
  if (block_size == 0) throw std::invalid_argument("block size must be positive");
  if (n % block_size != 0)
    throw std::invalid_argument("torchao quantizes whole blocks only: " + std::to_string(n) +
                                " elements is not a multiple of block size " + std::to_string(block_size));
}

// torch's amax(|x|) (torch 2.15 CPU, capabilities AVX2 and default observed): NaN anywhere makes it
// the canonical NaN 0x7FC00000, whatever the sign and payload of the NaN in the block.
float torch_amax_abs(std::span<const float> block) {
  float m = 0.0f;
  for (float v : block) {
    const float a = std::fabs(v);
    if (std::isnan(a)) return lowbit::float_from_bits(0x7FC00000u);
    m = std::max(m, a);
  }
  return m;
}

// torch's |x|.max(dim=-1) on the CPU (AVX2 and default observed): the first NaN's own bits with the
// sign cleared by the abs, not quieted.
float max_abs_keeping_nan(std::span<const float> block) {
  float m = 0.0f;
  for (float v : block) {
    const float a = std::fabs(v);
    if (std::isnan(a)) return a;
    m = std::max(m, a);
  }
  return m;
}

// torch's clip(min): NaN stays NaN.
float clip_below(float v, float floor) { return std::isnan(v) ? v : std::max(v, floor); }

// qmap[code] * scale[block], block by block (a tail block may be partial): the dequantization of
// every codebook format.
std::vector<float> lookup_times_scale(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                      std::span<const float> qmap, std::size_t block_size) {
  if (scale.size() < (codes.size() + block_size - 1) / block_size) throw std::invalid_argument("too few scales for the codes");
  std::vector<float> out(codes.size());
  for (std::size_t start = 0, b = 0; start < codes.size(); start += block_size, ++b) {
    const float s = scale[b];
    const std::size_t end = std::min(start + block_size, codes.size());
    for (std::size_t i = start; i < end; ++i) out[i] = qmap[codes[i]] * s;
  }
  return out;
}

}  // namespace

Quantized torchao_quantize(std::span<const float> x, std::span<const float> qmap, std::size_t block_size) {
  require_whole_blocks(x.size(), block_size);
  Quantized q;
  q.codes.resize(x.size());
  for (std::size_t start = 0; start < x.size(); start += block_size) {
    const auto block = x.subspan(start, block_size);
    const float scale = clip_below(torch_amax_abs(block), kTorchaoScaleFloor);
    q.scale.push_back(scale);
    for (std::size_t i = 0; i < block_size; ++i) q.codes[start + i] = codebook::torchao_search(block[i] / scale, qmap);
  }
  return q;
}

std::vector<float> torchao_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                      std::span<const float> qmap, std::size_t block_size) {
  require_whole_blocks(codes.size(), block_size);
  return lookup_times_scale(codes, scale, qmap, block_size);
}

Quantized torchao_fp8_quantize(std::span<const float> x, std::size_t block_size, const fp8::Policy& policy) {
  require_whole_blocks(x.size(), block_size);
  Quantized q;
  q.codes.resize(x.size());
  for (std::size_t start = 0; start < x.size(); start += block_size) {
    const auto block = x.subspan(start, block_size);
    const float scale = clip_below(torch_amax_abs(block), kTorchaoScaleFloor) / kE4M3Max;
    q.scale.push_back(scale);
    for (std::size_t i = 0; i < block_size; ++i)
      q.codes[start + i] = fp8::encode_nearest_even<fp8::E4M3FN>(block[i] / scale, policy);
  }
  return q;
}

std::vector<float> torchao_fp8_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                          std::size_t block_size, NanWidening widening) {
  require_whole_blocks(codes.size(), block_size);
  std::vector<float> out(codes.size());
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const float s = scale[i / block_size];
    const float v = fp8::decode<fp8::E4M3FN>(codes[i], widening);
    // Spelled out rather than left to the multiply, whose choice between two NaN operands is the
    // instruction's: in torch's result the NaN of the scale wins.
    out[i] = std::isnan(s) ? s : v * s;
  }
  return out;
}

Quantized fp8_perblock_quantize(std::span<const float> x, std::size_t block_size) {
  if (block_size == 0) throw std::invalid_argument("block size must be positive");
  Quantized q;
  q.codes.resize(x.size());
  for (std::size_t start = 0; start < x.size(); start += block_size) {
    const auto block = x.subspan(start, std::min(block_size, x.size() - start));
    float amax = 0.0f;
    for (float v : block) amax = std::max(amax, std::fabs(v));  // std::max(m, NaN) keeps m: NaN ignored
    const float scale = amax / kE4M3Max;
    q.scale.push_back(scale);
    for (std::size_t i = 0; i < block.size(); ++i)
      q.codes[start + i] = scale == 0.0f ? (std::isnan(block[i]) ? fp8::E4M3FN::quiet_nan : std::uint8_t{0})
                                         : fp8::encode_nearest_even<fp8::E4M3FN>(block[i] / scale, fp8::cuda_satfinite());
  }
  return q;
}

std::vector<float> fp8_perblock_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                           std::size_t block_size) {
  if (block_size == 0) throw std::invalid_argument("block size must be positive");
  if (scale.size() < (codes.size() + block_size - 1) / block_size) throw std::invalid_argument("too few scales for the codes");
  std::vector<float> out(codes.size());
  for (std::size_t i = 0; i < codes.size(); ++i) out[i] = fp8::decode<fp8::E4M3FN>(codes[i]) * scale[i / block_size];
  return out;
}

std::vector<std::uint8_t> pack_nibbles(std::span<const std::uint8_t> codes) {
  if (codes.size() % 2) throw std::invalid_argument("pack_nibbles: an odd number of 4-bit codes");
  std::vector<std::uint8_t> out(codes.size() / 2);
  for (std::size_t j = 0; j < out.size(); ++j)
    out[j] = static_cast<std::uint8_t>((codes[2 * j] << 4) | (codes[2 * j + 1] & 0x0F));
  return out;
}

std::vector<std::uint8_t> unpack_nibbles(std::span<const std::uint8_t> packed, std::size_t count) {
  if (count > 2 * packed.size()) throw std::invalid_argument("unpack_nibbles: not enough bytes");
  std::vector<std::uint8_t> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = (i % 2 == 0) ? packed[i / 2] >> 4 : packed[i / 2] & 0x0F;
  return out;
}

// torch's |x|.max() (a full reduction) on the CPU: with a NaN, its vectorized kernels return all ones
// (0xFFFFFFFF: the NaN mask OR-ed into the maximum), its scalar ones the first NaN's |x| quieted.
namespace {
float max_abs_reduction(std::span<const float> block, bool vectorized) {
  const float m = max_abs_keeping_nan(block);
  if (!std::isnan(m)) return m;
  return lowbit::float_from_bits(vectorized ? 0xFFFFFFFFu : (lowbit::bits_of(m) | 0x00400000u));
}
}  // namespace

Quantized bnb_quantize(std::span<const float> x, std::span<const float> qmap, std::size_t block_size,
                       BnbBackend backend, bool vectorized_max) {
  if (block_size == 0) throw std::invalid_argument("block size must be positive");
  Quantized q;
  q.codes.resize(x.size());
  std::optional<codebook::BnbCpuLut> lut;
  if (backend == BnbBackend::CpuLut) lut.emplace(qmap);
  for (std::size_t start = 0; start < x.size(); start += block_size) {
    const auto block = x.subspan(start, std::min(block_size, x.size() - start));
    const bool tail = block.size() < block_size;
    switch (backend) {
      case BnbBackend::CpuLut: {
        float absmax = 0.0f;  // std::max(a, NaN) keeps a: NaN is ignored
        for (float v : block) absmax = std::max(absmax, std::fabs(v));
        q.scale.push_back(absmax);
        if (absmax == 0.0f) break;  // codes stay 0
        const float inv = 1.0f / absmax;
        for (std::size_t i = 0; i < block.size(); ++i) q.codes[start + i] = (*lut)(block[i] * inv);
        break;
      }
      case BnbBackend::CudaIeee: {
        float absmax = -FLT_MAX;  // fmaxf ignores NaN
        for (float v : block) absmax = std::fmax(absmax, std::fabs(v));
        q.scale.push_back(absmax);
        const float inv = 1.0f / absmax;
        for (std::size_t i = 0; i < block.size(); ++i) q.codes[start + i] = codebook::bnb_cuda_search(block[i] * inv, qmap);
        break;
      }
      case BnbBackend::Default: {
        const float absmax = tail ? max_abs_reduction(block, vectorized_max) : max_abs_keeping_nan(block);
        const float floored = clip_below(absmax, 1e-38f);
        // full blocks store the raw absmax and multiply by its reciprocal; the tail stores the
        // floored absmax and divides by it
        q.scale.push_back(tail ? floored : absmax);
        const float inv = 1.0f / floored;
        for (std::size_t i = 0; i < block.size(); ++i) {
          const float y = tail ? block[i] / floored : block[i] * inv;
          const float clamped = std::isnan(y) ? y : std::clamp(y, -1.0f, 1.0f);
          q.codes[start + i] = codebook::bnb_default_search(clamped, qmap);
        }
        break;
      }
    }
  }
  return q;
}

std::vector<float> bnb_dequantize(std::span<const std::uint8_t> codes, std::span<const float> absmax,
                                  std::span<const float> qmap, std::size_t block_size) {
  if (block_size == 0) throw std::invalid_argument("block size must be positive");
  return lookup_times_scale(codes, absmax, qmap, block_size);
}

}  // namespace lowbit::blockwise
