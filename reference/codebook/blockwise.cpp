#include "lowbit/blockwise.hpp"
#include "lowbit/torch_cpu_mul.hpp"

#include <array>
#include <cstring>
#include <memory>
#include <mutex>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "codebook/blockwise_blocks.hpp"
#include "fast/fast_ops.hpp"
#include "fast/fast_policy.hpp"
#include "lowbit/parallel_blocks.hpp"

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

}  // namespace

// torch 2.15's |x|.max() (a full reduction: aten/src/ATen/native/cpu/ReduceAllOpsKernel.cpp) on the
// CPU, with a NaN among the elements (observed for every place of one and two NaNs in 1 to 100
// elements, and 3 000 random sets of 3 to 6 NaNs in up to 300, at each capability):
//   vectorized (AVX2, AVX-512): all ones, 0xFFFFFFFF (the NaN mask OR-ed into the maximum) from two
//     elements up; one element alone is returned as its |x| quieted (no vector maximum is taken);
//   scalar (default): 8 accumulators, element i in lane i mod 8, each keeping its first NaN; the
//     lowest lane holding a NaN gives the result, its |x| quieted.
namespace {
float max_abs_reduction(std::span<const float> block, bool vectorized) {
  const float m = max_abs_keeping_nan(block);
  if (!std::isnan(m)) return m;
  if (vectorized && block.size() > 1) return lowbit::float_from_bits(0xFFFFFFFFu);
  std::size_t first = block.size();  // the NaN of the lowest lane (with vectorized, the one element)
  for (std::size_t i = 0; i < block.size(); ++i)
    if (std::isnan(block[i]) && (first == block.size() || i % 8 < first % 8)) first = i;
  return lowbit::float_from_bits(lowbit::bits_of(std::fabs(block[first])) | 0x00400000u);
}
}  // namespace


namespace {

void require_positive(std::size_t block_size) {
  if (block_size == 0) throw std::invalid_argument("block size must be positive");
}

void require_outputs(std::size_t n, std::size_t block_size, std::size_t codes, std::size_t scales) {
  if (codes != n) throw std::invalid_argument("room for " + std::to_string(codes) + " codes, " + std::to_string(n) + " needed");
  if (scales != block_count(n, block_size))
    throw std::invalid_argument("room for " + std::to_string(scales) + " scales, " +
                                std::to_string(block_count(n, block_size)) + " needed");
}

void require_dequant(std::size_t codes, std::size_t scales, std::size_t block_size, std::size_t out) {
  if (scales < block_count(codes, block_size)) throw std::invalid_argument("too few scales for the codes");
  if (out != codes) throw std::invalid_argument("room for " + std::to_string(out) + " values, " + std::to_string(codes) + " needed");
}

// Block b of x (the last may be partial).
std::span<const float> block_of(std::span<const float> x, std::size_t b, std::size_t block_size) {
  const std::size_t start = b * block_size;
  return x.subspan(start, std::min(block_size, x.size() - start));
}

// ---- one block, scalar: the readable definitions --------------------------------------------------

// torchao's FP8 dequantize: whether element i of n takes its block's NaN scale over its own NaN
// (torch_cpu_mul.hpp, torchao_fp8_scale_nan_wins, shared with our CUDA kernel).
bool scale_nan_wins(std::size_t i, std::size_t block_size, std::size_t n, bool vectorized) {
  return torchao_fp8_scale_nan_wins(static_cast<std::int64_t>(i), static_cast<std::int64_t>(block_size),
                                    static_cast<std::int64_t>(n), vectorized);
}

float torchao_block(std::span<const float> block, std::span<const float> qmap, std::uint8_t* codes) {
  const float scale = clip_below(torch_amax_abs(block), kTorchaoScaleFloor);
  for (std::size_t i = 0; i < block.size(); ++i) codes[i] = codebook::torchao_search(block[i] / scale, qmap);
  return scale;
}

float torchao_fp8_block(std::span<const float> block, const fp8::Policy& policy, std::uint8_t* codes) {
  const float scale = torchao_fp8_clipped_amax(block) / kE4M3Max;
  for (std::size_t i = 0; i < block.size(); ++i) codes[i] = fp8::encode_nearest_even<fp8::E4M3FN>(block[i] / scale, policy);
  return scale;
}

// A block whose scale is 0 (all zeros, or amax below 448 * 2^-150): code 0, NaN the quiet NaN.
void perblock_zero_scale_codes(std::span<const float> block, std::uint8_t* codes) {
  for (std::size_t i = 0; i < block.size(); ++i) codes[i] = std::isnan(block[i]) ? fp8::E4M3FN::quiet_nan : std::uint8_t{0};
}

float perblock_block(std::span<const float> block, std::uint8_t* codes) {
  float amax = 0.0f;
  for (float v : block) amax = std::max(amax, std::fabs(v));  // std::max(m, NaN) keeps m: NaN ignored
  const float scale = amax / kE4M3Max;
  if (scale == 0.0f) perblock_zero_scale_codes(block, codes);
  else
    for (std::size_t i = 0; i < block.size(); ++i)
      codes[i] = fp8::encode_nearest_even<fp8::E4M3FN>(block[i] / scale, fp8::cuda_satfinite());
  return scale;
}

float bnb_cpu_block(std::span<const float> block, const codebook::BnbCpuLut& lut, std::uint8_t* codes) {
  float absmax = 0.0f;  // std::max(a, NaN) keeps a: NaN is ignored
  for (float v : block) absmax = std::max(absmax, std::fabs(v));
  if (absmax == 0.0f) {
    std::fill_n(codes, block.size(), std::uint8_t{0});
    return absmax;
  }
  const float inv = 1.0f / absmax;
  for (std::size_t i = 0; i < block.size(); ++i) codes[i] = lut(block[i] * inv);
  return absmax;
}

float bnb_cuda_block(std::span<const float> block, std::span<const float> qmap, std::uint8_t* codes) {
  float absmax = -FLT_MAX;  // fmaxf ignores NaN
  for (float v : block) absmax = std::fmax(absmax, std::fabs(v));
  const float inv = 1.0f / absmax;
  for (std::size_t i = 0; i < block.size(); ++i) codes[i] = codebook::bnb_cuda_search(block[i] * inv, qmap);
  return absmax;
}

float bnb_default_block(std::span<const float> block, std::span<const float> qmap, bool tail, bool vectorized_max,
                        std::uint8_t* codes) {
  const float absmax = tail ? max_abs_reduction(block, vectorized_max) : max_abs_keeping_nan(block);
  const float floored = clip_below(absmax, 1e-38f);
  // full blocks store the raw absmax and multiply by its reciprocal; the tail stores the
  // floored absmax and divides by it
  const float inv = 1.0f / floored;
  for (std::size_t i = 0; i < block.size(); ++i) {
    const float y = tail ? block[i] / floored : block[i] * inv;
    const float clamped = std::isnan(y) ? y : std::clamp(y, -1.0f, 1.0f);
    codes[i] = codebook::bnb_default_search(clamped, qmap);
  }
  return tail ? floored : absmax;
}

// qmap[code] * scale[block] over blocks [first, end): the dequantization of every codebook format.
void lookup_times_scale(std::span<const std::uint8_t> codes, std::span<const float> scale, std::span<const float> qmap,
                        std::size_t block_size, std::span<float> out, std::size_t first, std::size_t end) {
  // The table copied to a local array: out may not alias it then, so the compiler is free to keep
  // the loop in vector registers (2x on 2^26 codes). The arithmetic is one IEEE multiply per element
  // either way, so the bytes cannot depend on how it is compiled.
  std::array<float, 256> table{};
  std::copy_n(qmap.begin(), std::min(qmap.size(), table.size()), table.begin());
  for (std::size_t b = first; b < end; ++b) {
    const float s = scale[b];
    const std::size_t stop = std::min((b + 1) * block_size, codes.size());
    for (std::size_t i = b * block_size; i < stop; ++i) out[i] = table[codes[i]] * s;
  }
}

// ---- one block, vectorized (fast_kernels.hpp): the same bytes as the functions above ----------------

// ---- the bucket table of torchao's search (fast_ops.hpp kBucketShift) -------------------------------
// Why a bucket's two ends decide for the whole bucket: the patterns of a bucket without NaN or Inf
// (its exponent field is not all ones) share a sign, so they are every float between its two end
// values. Each comparison y >= q[k] of the search is monotone in y, and the path of comparisons
// fixes the bracket c; if both ends reach the same c, every y between takes the same path (step by
// step). With c fixed, y - q[c] is monotone in y and the half-gap is fixed, so the last step is
// monotone too: the same code at both ends means the same code throughout. No assumption on the
// table (sorted or not, NaN entries): only on the ordering of floats. Buckets of the all-ones
// exponent are marked unknown: the kernel runs the whole search there.
std::vector<std::int32_t> build_search_buckets(std::span<const float> q, int threads) {
  std::vector<std::int32_t> table(std::size_t{1} << (32 - fast::kBucketShift));
  constexpr std::size_t kPerRange = 4096;
  parallel::for_block_ranges(table.size() / kPerRange, threads, [&](std::size_t first, std::size_t end) {
    for (std::size_t b = first * kPerRange; b < end * kPerRange; ++b) {
      const auto lo = static_cast<std::uint32_t>(b) << fast::kBucketShift;
      const std::uint32_t hi = lo | ((1u << fast::kBucketShift) - 1);
      // Unknown (0), so the kernel runs the whole search there: Inf and NaN; and |y| > 1, where no
      // quantizer's y lies (|x| <= amax <= scale, and a correctly rounded x / scale keeps |y| <= 1),
      // which halves the table's cost
      if (((lo >> 23) & 0xFF) == 0xFF || (lo & 0x7FFFFFFFu) > 0x3F800000u) continue;
      const float ya = lowbit::float_from_bits(lo), yb = lowbit::float_from_bits(hi);
      const std::size_t c = codebook::torchao_bracket(ya, q);
      if (c != codebook::torchao_bracket(yb, q)) continue;
      // both ends share the bracket c: each one's code is the last step from c
      const std::uint8_t code = codebook::torchao_last_step(ya, c, q);
      table[b] = static_cast<std::int32_t>(c) | fast::kBracketKnown |
                 (code == codebook::torchao_last_step(yb, c, q) ? (std::int32_t{code} << 8) | fast::kCodeKnown : 0);
    }
  });
  return table;
}

// The tables of the last few codebooks used (4 MiB each), by the codebook's bytes, with the elements
// searched with each codebook (saturating).
struct SearchTables {
  struct Entry {
    std::vector<float> qmap;
    std::size_t searched = 0;
    std::shared_ptr<const std::vector<std::int32_t>> table;
  };
  std::mutex mutex;
  std::vector<Entry> cache;

  // q's entry (a new one, the oldest of four dropped, when q has none); the caller holds mutex.
  Entry& entry(std::span<const float> q) {
    for (Entry& e : cache)
      if (e.qmap.size() == q.size() && std::memcmp(e.qmap.data(), q.data(), q.size_bytes()) == 0) return e;
    if (cache.size() == 4) cache.erase(cache.begin());
    cache.push_back({std::vector<float>(q.begin(), q.end()), 0, nullptr});
    return cache.back();
  }
  static const std::shared_ptr<const std::vector<std::int32_t>>& built(Entry& e, int threads) {
    if (!e.table) e.table = std::make_shared<const std::vector<std::int32_t>>(build_search_buckets(e.qmap, threads));
    return e.table;
  }
};

SearchTables& search_tables() {
  static SearchTables tables;
  return tables;
}

std::shared_ptr<const std::vector<std::int32_t>> cached_search_buckets(std::span<const float> q, int threads) {
  SearchTables& t = search_tables();
  const std::lock_guard<std::mutex> lock(t.mutex);
  return SearchTables::built(t.entry(q), threads);
}

}  // namespace

// The table for a call of this many elements: built (or kept) once the elements searched with the
// codebook, this call's included, reach search_table_min_elements, and from then on serving every
// call on it, whatever its size (the audit searches a 2^26-element tensor in chunks of 2^18, each
// below the threshold on its own); null before, and always null at SIZE_MAX.
std::shared_ptr<const std::vector<std::int32_t>> detail::search_buckets(std::span<const float> q, std::size_t elements,
                                                                        int threads) {
  if (search_table_min_elements == SIZE_MAX) return nullptr;  // never
  SearchTables& t = search_tables();
  const std::lock_guard<std::mutex> lock(t.mutex);
  SearchTables::Entry& e = t.entry(q);
  e.searched = elements > SIZE_MAX - e.searched ? SIZE_MAX : e.searched + elements;
  if (e.searched < search_table_min_elements) return nullptr;  // not (yet) worth it for this codebook
  return SearchTables::built(e, threads);
}

namespace {

// torch_amax_abs from the kernel's two answers
float torch_amax_of(const fast::AbsMax& m) { return m.has_nan ? lowbit::float_from_bits(0x7FC00000u) : m.max; }

}  // namespace

std::size_t block_count(std::size_t elements, std::size_t block_size) {
  require_positive(block_size);
  return elements / block_size + (elements % block_size != 0);
}

// ---- the scalar definitions -----------------------------------------------------------------------

namespace scalar {

void torchao_quantize(std::span<const float> x, std::span<const float> qmap, std::size_t block_size,
                      std::span<std::uint8_t> codes, std::span<float> scale) {
  require_whole_blocks(x.size(), block_size);
  require_outputs(x.size(), block_size, codes.size(), scale.size());
  for (std::size_t b = 0; b < scale.size(); ++b) scale[b] = torchao_block(block_of(x, b, block_size), qmap, &codes[b * block_size]);
}

void torchao_fp8_quantize(std::span<const float> x, std::size_t block_size, const fp8::Policy& policy,
                          std::span<std::uint8_t> codes, std::span<float> scale) {
  require_whole_blocks(x.size(), block_size);
  require_outputs(x.size(), block_size, codes.size(), scale.size());
  for (std::size_t b = 0; b < scale.size(); ++b)
    scale[b] = torchao_fp8_block(block_of(x, b, block_size), policy, &codes[b * block_size]);
}

void torchao_fp8_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale, std::size_t block_size,
                            NanWidening widening, std::span<float> out, bool vectorized) {
  require_whole_blocks(codes.size(), block_size);
  require_dequant(codes.size(), scale.size(), block_size, out.size());
  for (std::size_t b = 0; b < codes.size() / block_size; ++b) {
    const float s = scale[b];
    for (std::size_t i = b * block_size; i < (b + 1) * block_size; ++i) {
      const float v = fp8::decode<fp8::E4M3FN>(codes[i], widening);
      // Spelled out rather than left to the multiply, whose choice between two NaN operands is the
      // instruction's: torch's loop returns the scale's or the code's by lane (torch_cpu_mul.hpp)
      const bool scale_wins = scale_nan_wins(i, block_size, codes.size(), vectorized);
      out[i] = std::isnan(s) ? (std::isnan(v) && !scale_wins ? v : s) : v * s;
    }
  }
}

void fp8_perblock_quantize(std::span<const float> x, std::size_t block_size, std::span<std::uint8_t> codes,
                           std::span<float> scale) {
  require_outputs(x.size(), block_size, codes.size(), scale.size());
  for (std::size_t b = 0; b < scale.size(); ++b) scale[b] = perblock_block(block_of(x, b, block_size), &codes[b * block_size]);
}

void fp8_perblock_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale, std::size_t block_size,
                             std::span<float> out) {
  require_positive(block_size);
  require_dequant(codes.size(), scale.size(), block_size, out.size());
  for (std::size_t b = 0; b * block_size < codes.size(); ++b)
    for (std::size_t i = b * block_size; i < std::min((b + 1) * block_size, codes.size()); ++i)
      out[i] = fp8::decode<fp8::E4M3FN>(codes[i]) * scale[b];
}

void bnb_quantize(std::span<const float> x, std::span<const float> qmap, std::size_t block_size, BnbBackend backend,
                  bool vectorized_max, std::span<std::uint8_t> codes, std::span<float> scale) {
  require_outputs(x.size(), block_size, codes.size(), scale.size());
  std::optional<codebook::BnbCpuLut> lut;
  if (backend == BnbBackend::CpuLut) lut.emplace(qmap);
  for (std::size_t b = 0; b < scale.size(); ++b) {
    const auto block = block_of(x, b, block_size);
    std::uint8_t* out = &codes[b * block_size];
    switch (backend) {
      case BnbBackend::CpuLut: scale[b] = bnb_cpu_block(block, *lut, out); break;
      case BnbBackend::CudaIeee: scale[b] = bnb_cuda_block(block, qmap, out); break;
      case BnbBackend::Default: scale[b] = bnb_default_block(block, qmap, block.size() < block_size, vectorized_max, out); break;
    }
  }
}

}  // namespace scalar

// ---- the fast paths -------------------------------------------------------------------------------

void prepare_search_table(std::span<const float> qmap, int threads) {
  if (qmap.size() == 16 || qmap.size() == 256) cached_search_buckets(qmap, threads);
}

void torchao_quantize_into(std::span<const float> x, std::span<const float> qmap, std::size_t block_size,
                           std::span<std::uint8_t> codes, std::span<float> scale, int threads) {
  require_whole_blocks(x.size(), block_size);
  require_outputs(x.size(), block_size, codes.size(), scale.size());
  if (!x.empty() && qmap.size() != 16 && qmap.size() != 256)  // (the scalar search's check, once)
    throw std::invalid_argument("torchao_search: qmap must have 16 or 256 entries");
  if (x.empty()) return;
  const auto buckets = detail::search_buckets(qmap, x.size(), threads);
  parallel::for_block_ranges(scale.size(), threads, [&](std::size_t first, std::size_t end) {
    detail::torchao_quantize_blocks(x.subspan(first * block_size, (end - first) * block_size), qmap, block_size,
                                    buckets ? buckets->data() : nullptr, codes.data() + first * block_size,
                                    scale.data() + first);
  });
}

void detail::torchao_quantize_blocks(std::span<const float> x, std::span<const float> qmap, std::size_t block_size,
                                     const std::int32_t* buckets, std::uint8_t* codes, float* scale) {
  const fast::Ops& ops = fast::ops();
  const auto search = qmap.size() == 16 ? ops.torchao_search16 : ops.torchao_search256;
  const auto search_table = qmap.size() == 16 ? ops.torchao_search16_table : ops.torchao_search256_table;
  for (std::size_t b = 0; b < x.size() / block_size; ++b) {
    const float* block = x.data() + b * block_size;
    const float s = clip_below(torch_amax_of(ops.abs_max(block, block_size)), kTorchaoScaleFloor);
    scale[b] = s;
    if (buckets) search_table(block, s, qmap.data(), buckets, codes + b * block_size, block_size);
    else search(block, s, qmap.data(), codes + b * block_size, block_size);
  }
}

void torchao_dequantize_into(std::span<const std::uint8_t> codes, std::span<const float> scale,
                             std::span<const float> qmap, std::size_t block_size, std::span<float> out, int threads) {
  require_whole_blocks(codes.size(), block_size);
  require_dequant(codes.size(), scale.size(), block_size, out.size());
  parallel::for_block_ranges(block_count(codes.size(), block_size), threads, [&](std::size_t first, std::size_t end) {
    lookup_times_scale(codes, scale, qmap, block_size, out, first, end);
  });
}

void torchao_fp8_quantize_into(std::span<const float> x, std::size_t block_size, const fp8::Policy& policy,
                               std::span<std::uint8_t> codes, std::span<float> scale, int threads) {
  require_whole_blocks(x.size(), block_size);
  require_outputs(x.size(), block_size, codes.size(), scale.size());
  const fast::Ops& ops = fast::ops();
  const fast::EncodeConstants k = fast::encode_constants(fp8::FormatId::E4M3FN, policy);
  parallel::for_block_ranges(scale.size(), threads, [&](std::size_t first, std::size_t end) {
    for (std::size_t b = first; b < end; ++b) {
      const float* block = x.data() + b * block_size;
      const float s = clip_below(torch_amax_of(ops.abs_max(block, block_size)), kTorchaoScaleFloor) / kE4M3Max;
      scale[b] = s;
      ops.encode_e4m3_divided(block, s, codes.data() + b * block_size, block_size, k);
    }
  });
}

void torchao_fp8_dequantize_into(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                 std::size_t block_size, NanWidening widening, std::span<float> out, int threads,
                                 bool vectorized) {
  require_whole_blocks(codes.size(), block_size);
  require_dequant(codes.size(), scale.size(), block_size, out.size());
  std::array<float, 256> value;  // every code's widened value, by the scalar decoder
  for (std::size_t c = 0; c < value.size(); ++c) value[c] = fp8::decode<fp8::E4M3FN>(static_cast<std::uint8_t>(c), widening);
  parallel::for_block_ranges(scale.size(), threads, [&](std::size_t first, std::size_t end) {
    for (std::size_t b = first; b < end; ++b) {
      const float s = scale[b];
      const std::size_t start = b * block_size;
      if (std::isnan(s)) {  // the scale's NaN, or a NaN code's own where torch's loop returns it (scalar::)
        for (std::size_t i = start; i < start + block_size; ++i) {
          const float v = value[codes[i]];
          const bool own = std::isnan(v) && !scale_nan_wins(i, block_size, codes.size(), vectorized);
          out[i] = own ? v : s;
        }
      } else
        for (std::size_t i = start; i < start + block_size; ++i) out[i] = value[codes[i]] * s;
    }
  });
}

void fp8_perblock_quantize_into(std::span<const float> x, std::size_t block_size, std::span<std::uint8_t> codes,
                                std::span<float> scale, int threads) {
  require_outputs(x.size(), block_size, codes.size(), scale.size());
  const fast::Ops& ops = fast::ops();
  const fast::EncodeConstants k = fast::encode_constants(fp8::FormatId::E4M3FN, fp8::cuda_satfinite());
  parallel::for_block_ranges(scale.size(), threads, [&](std::size_t first, std::size_t end) {
    for (std::size_t b = first; b < end; ++b) {
      const auto block = block_of(x, b, block_size);
      std::uint8_t* out = codes.data() + b * block_size;
      const float s = ops.abs_max(block.data(), block.size()).max / kE4M3Max;  // NaN ignored
      scale[b] = s;
      if (s == 0.0f) perblock_zero_scale_codes(block, out);
      else ops.encode_e4m3_divided(block.data(), s, out, block.size(), k);
    }
  });
}

void fp8_perblock_dequantize_into(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                  std::size_t block_size, std::span<float> out, int threads) {
  require_positive(block_size);
  require_dequant(codes.size(), scale.size(), block_size, out.size());
  std::array<float, 256> value;
  for (std::size_t c = 0; c < value.size(); ++c) value[c] = fp8::decode<fp8::E4M3FN>(static_cast<std::uint8_t>(c));
  parallel::for_block_ranges(block_count(codes.size(), block_size), threads, [&](std::size_t first, std::size_t end) {
    for (std::size_t b = first; b < end; ++b) {
      const float s = scale[b];
      for (std::size_t i = b * block_size, stop = std::min(i + block_size, codes.size()); i < stop; ++i) out[i] = value[codes[i]] * s;
    }
  });
}

void bnb_quantize_into(std::span<const float> x, std::span<const float> qmap, std::size_t block_size,
                       BnbBackend backend, bool vectorized_max, std::span<std::uint8_t> codes, std::span<float> scale,
                       int threads) {
  require_outputs(x.size(), block_size, codes.size(), scale.size());
  std::optional<codebook::BnbCpuLut> lut;
  if (backend == BnbBackend::CpuLut) lut.emplace(qmap);
  parallel::for_block_ranges(scale.size(), threads, [&](std::size_t first, std::size_t end) {
    for (std::size_t b = first; b < end; ++b) {
      const auto block = block_of(x, b, block_size);
      std::uint8_t* out = codes.data() + b * block_size;
      switch (backend) {
        case BnbBackend::CpuLut: detail::bnb_lut_quantize_blocks(block, *lut, block_size, out, &scale[b]); break;
        // not vectorized (not the CPU library's path): the scalar blocks, threaded
        case BnbBackend::CudaIeee: scale[b] = bnb_cuda_block(block, qmap, out); break;
        case BnbBackend::Default: scale[b] = bnb_default_block(block, qmap, block.size() < block_size, vectorized_max, out); break;
      }
    }
  });
}

void detail::bnb_lut_quantize_blocks(std::span<const float> x, const codebook::BnbCpuLut& lut, std::size_t block_size,
                                     std::uint8_t* codes, float* scale) {
  const fast::Ops& ops = fast::ops();
  for (std::size_t b = 0; b * block_size < x.size(); ++b) {
    const auto block = block_of(x, b, block_size);
    std::uint8_t* out = codes + b * block_size;
    const float absmax = ops.abs_max(block.data(), block.size()).max;  // NaN ignored
    scale[b] = absmax;
    if (absmax == 0.0f) std::fill_n(out, block.size(), std::uint8_t{0});
    else ops.bnb_lut(block.data(), 1.0f / absmax, lut.table().data(), out, block.size());
  }
}

void bnb_dequantize_into(std::span<const std::uint8_t> codes, std::span<const float> absmax,
                         std::span<const float> qmap, std::size_t block_size, std::span<float> out, int threads) {
  require_dequant(codes.size(), absmax.size(), block_size, out.size());
  parallel::for_block_ranges(block_count(codes.size(), block_size), threads, [&](std::size_t first, std::size_t end) {
    lookup_times_scale(codes, absmax, qmap, block_size, out, first, end);
  });
}

// ---- the vector-returning wrappers ------------------------------------------------------------------

namespace {
Quantized sized_for(std::size_t n, std::size_t block_size) {
  Quantized q;
  q.codes.resize(n);
  q.scale.resize(block_count(n, block_size));
  return q;
}
}  // namespace

Quantized torchao_quantize(std::span<const float> x, std::span<const float> qmap, std::size_t block_size, int threads) {
  require_whole_blocks(x.size(), block_size);
  Quantized q = sized_for(x.size(), block_size);
  torchao_quantize_into(x, qmap, block_size, q.codes, q.scale, threads);
  return q;
}

std::vector<float> torchao_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                      std::span<const float> qmap, std::size_t block_size, int threads) {
  require_whole_blocks(codes.size(), block_size);
  std::vector<float> out(codes.size());
  torchao_dequantize_into(codes, scale, qmap, block_size, out, threads);
  return out;
}

float torchao_fp8_clipped_amax(std::span<const float> block) { return clip_below(torch_amax_abs(block), kTorchaoScaleFloor); }

Quantized torchao_fp8_quantize(std::span<const float> x, std::size_t block_size, const fp8::Policy& policy, int threads) {
  require_whole_blocks(x.size(), block_size);
  Quantized q = sized_for(x.size(), block_size);
  torchao_fp8_quantize_into(x, block_size, policy, q.codes, q.scale, threads);
  return q;
}

std::vector<float> torchao_fp8_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                          std::size_t block_size, NanWidening widening, bool vectorized, int threads) {
  require_whole_blocks(codes.size(), block_size);
  std::vector<float> out(codes.size());
  torchao_fp8_dequantize_into(codes, scale, block_size, widening, out, threads, vectorized);
  return out;
}

Quantized fp8_perblock_quantize(std::span<const float> x, std::size_t block_size, int threads) {
  Quantized q = sized_for(x.size(), block_size);
  fp8_perblock_quantize_into(x, block_size, q.codes, q.scale, threads);
  return q;
}

std::vector<float> fp8_perblock_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                           std::size_t block_size, int threads) {
  std::vector<float> out(codes.size());
  fp8_perblock_dequantize_into(codes, scale, block_size, out, threads);
  return out;
}

Quantized bnb_quantize(std::span<const float> x, std::span<const float> qmap, std::size_t block_size,
                       BnbBackend backend, bool vectorized_max, int threads) {
  Quantized q = sized_for(x.size(), block_size);
  bnb_quantize_into(x, qmap, block_size, backend, vectorized_max, q.codes, q.scale, threads);
  return q;
}

std::vector<float> bnb_dequantize(std::span<const std::uint8_t> codes, std::span<const float> absmax,
                                  std::span<const float> qmap, std::size_t block_size, int threads) {
  std::vector<float> out(codes.size());
  bnb_dequantize_into(codes, absmax, qmap, block_size, out, threads);
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

}  // namespace lowbit::blockwise
