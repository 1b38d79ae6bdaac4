#pragma once
// Round-trip error audit: a tensor through a format's reference quantize -> dequantize at a given
// block size, and the error measures of the result (docs/audit.md defines each one). Deterministic:
// the work is split into fixed chunks of whole blocks, per-block sums are combined in block order,
// so the numbers are the same bytes for any thread count.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lowbit::audit {

enum class Format { Torchao8, Torchao4, TorchaoFp8, Bnb8, Fp8PerBlock, Coat, CoatExpand };

struct FormatInfo {
  Format id;
  std::string_view name;         // as the CLI spells it: torchao-8bit, ...
  std::string_view description;  // one line: what the reference does
};
const std::vector<FormatInfo>& formats();
std::string_view format_name(Format f);
// std::invalid_argument naming the known formats for an unknown name.
Format parse_format(std::string_view name);

inline constexpr std::size_t kMinBlock = 16, kMaxBlock = 65536;  // what --block-sizes accepts
// Empty when the format runs at this block size, else why not ("n/a (COAT groups are 128)").
std::string unsupported_reason(Format f, std::size_t block_size);

// The dequantized values of x after the format's reference quantize at block_size (x finite; the
// format must support the block size). torchao formats zero-pad a partial tail block (docs/audit.md).
std::vector<float> round_trip(Format f, std::span<const float> x, std::size_t block_size, int threads = 1);

struct Metrics {
  std::size_t n = 0, blocks = 0;
  bool is_signed = false;      // the data has a negative value (selects the signed maps)
  double mean_abs = 0;         // mean |x - x^|
  double mean_rel = 0;         // bitsandbytes' test: mean |x - x^| / |x + 1e-8|
  double rel_l2 = 0;           // ||x - x^|| / ||x||
  double max_abs = 0;          // max |x - x^|
  double sqnr_db = 0;          // 10 log10(sum x^2 / sum (x - x^)^2); +inf when exact
  std::size_t nonzeros = 0;    // x != 0
  std::size_t flushed = 0;     // x != 0 and x^ == 0
  double flushed_fraction = 0; // flushed / nonzeros (0 when no nonzeros)
  std::size_t worst_block = 0; // the block with the largest mean |x - x^| (first on ties)
  double worst_block_mean_abs = 0;
};

// The measures of x^ against x over blocks of block_size (the last block may be partial).
Metrics measure(std::span<const float> x, std::span<const float> xhat, std::size_t block_size, int threads = 1);

// round_trip and measure in one pass, chunk by chunk (no full-size copy of x^).
Metrics audit(Format f, std::span<const float> x, std::size_t block_size, int threads = 1);

// Synthetic AdamW moments (docs/audit.md): float32 AdamW moment updates, beta1 0.9, beta2 0.999,
// torch's single-tensor formulas (exp_avg.lerp_(g, 1 - b1); exp_avg_sq.mul_(b2).addcmul_(g, g,
// value = 1 - b2)), `steps` steps on gradients g_t[i] = std * s[i] * z_t[i] with z_t ~ N(0, 1) and
// a per-coordinate scale s[i] = exp(spread * N(0, 1)).
struct AdamSpec {
  bool second = false;  // adam-v (exp_avg_sq) rather than adam-m (exp_avg)
  std::size_t n = 4096;
  std::uint64_t seed = 1;
  int steps = 10;
  double std = 1e-3, spread = 1.0;
};
std::vector<float> adam_moment(const AdamSpec& spec);

// An input spec: generators.hpp kinds ("normal:n=...,seed=...") or adam-m / adam-v with keys n,
// seed, steps, std, spread. std::invalid_argument on a bad spec.
std::vector<float> make_input(const std::string& spec);
// The parse of make_input alone (no values made): std::invalid_argument on a bad spec.
void check_input(const std::string& spec);

}  // namespace lowbit::audit
