#pragma once
// Input generators for golden generate and the audit. Deterministic for a seed on every
// platform: mt19937_64 (fully specified by the standard) with our own transforms, never the
// std:: distributions, whose outputs differ between standard libraries.
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "lowbit/formats.hpp"

namespace lowbit {

// "kind:key=value,key=value", e.g. "normal:n=4096,seed=3,std=0.01". Kinds and their keys:
//   normal (mean=0, std=1), uniform (lo=-1, hi=1), lognormal (mu=0, sigma=2; random signs),
//   student-t (nu=3), constant (value=1), outliers (std=1, scale=1e4, block=256: one huge value per
//   block), special (zeros, signed zeros, binary32 subnormals, NaN, Inf, extremes),
//   edges (the format's own boundaries: every value, every midpoint and its neighbours),
//   scaled-edges (block-wise formats: the edges under block scales that are not powers of two, each
//   value also 1 and 2 ulps either way: separates x / s from x * (1 / s), fused from unfused, ties),
//   table-edges (bitsandbytes' CPU back end: its lookup table's cell boundaries where the code
//   changes, and the cells either side, with their float32 neighbours, under non-power-of-two absmaxes),
//   tiny-blocks (block-wise formats: the edges under tiny and subnormal absmaxes), special-blocks
//   (block-wise formats: blocks all NaN, all Inf, all -0.0, +0/-0 mixed, and a last block, partial
//   where the format allows it, ending on its largest value; lowbit/block_inputs.hpp), nan-tiles
//   (COAT's group quantizers: tiles of numbers whose groups are led by a NaN, end on one, or are all NaN),
//   gradient-blocks (std=1; block-wise formats: normal values with a block of zeros, one of 1e-20
//   times them, one holding a NaN, one +Inf, one -Inf, moving with the seed; an optimizer's parameter
//   is the normal draw, its gradients these: lowbit/block_inputs.hpp),
//   adam-m, adam-v (steps=10, std=1e-3, spread=1: synthetic AdamW moments, AdamSpec below),
//   all-bf16, all-f16 (every bit pattern of the 16-bit float, 0x0000 to 0xFFFF, as its value: at every
//   exponent every mantissa a 16-bit input holds, subnormals, Inf, every NaN payload),
//   file:PATH[:TENSOR] (the user's own tensor from a safetensors file: lowbit/file_input.hpp).
// Every generated kind also takes dtype (f32, the default; bf16 or f16): the input tensor's dtype, each
// value narrowed to it by narrowed_bits (a kernel's 16-bit path; all-bf16:dtype=bf16 is every bf16).
// Every kind takes n (default 4096) and seed (default 1). special, the edges and the blocks are fixed lists: without
// n the whole list; with n its first n values, the list repeated from its start when n is longer.
// The largest n: 2^28 float32 values are 1 GiB; golden generate holds the input, the reference's
// arrays and every serialized case of the run (7 to 27 GiB at this size by format, measured at 2^24
// and extrapolated in docs/golden-files.md#memory; the audit 1.2 to 5 GiB). seed is
// a whole number a double holds exactly; student-t's nu counts the normals drawn per value.
inline constexpr double kMaxCount = 268435456.0;         // 2^28
inline constexpr double kMaxSeed = 9007199254740992.0;   // 2^53
inline constexpr double kMaxNu = 1000.0;

struct InputSpec {
  std::string kind;
  std::map<std::string, std::string> args;
  std::string text;  // as given, for provenance
  std::uint64_t seed() const;
  std::size_t count() const;
  DType dtype() const;  // the dtype key: F32 (absent or f32), BF16 or F16; std::invalid_argument otherwise
  double number(const std::string& key, double fallback) const;
  // number() that must be a whole number in [lo, hi]; std::invalid_argument naming key and range.
  double whole(const std::string& key, double fallback, double lo, double hi) const;
};

InputSpec parse_input_spec(const std::string& text);

// A float32 value as the bits of a 16-bit float d (BF16 or F16): rounded to nearest, ties to even
// (overflow to Inf, gradual underflow); a NaN keeps its sign and the top of its payload (the quiet bit
// set only where those bits are all zero, so it stays a NaN). Exact on every value d holds, NaN
// payloads included: all-f16:dtype=f16 is every f16 bit pattern.
std::uint16_t narrowed_bits(DType d, float x);

// The transforms every generator draws with, for other code that needs its own distributions:
// uniform in [0, 1) from the top 53 bits, and a standard normal by Box-Muller (the cosine branch
// only: one draw per pair, simple and portable).
double unit_uniform(std::mt19937_64& rng);
double standard_normal(std::mt19937_64& rng);

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
std::vector<float> adam_moment(const AdamSpec& spec, int threads = 1);

// The values of a spec (narrowed to its dtype and widened again: exactly the input tensor's values);
// edges asks the format (with its params) for its boundaries.
// std::invalid_argument on a bad spec. threads: how many make the values of a random kind (the
// draws stay one sequence, taken in order): the same values for any count.
std::vector<float> generate_inputs(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params,
                                   int threads = 1);

// The parameter that sizes the blocks of a format's edges (block_size; COAT's group_size: each block
// of its edges is led by an absmax of 1), or "" for a format without blocks: scaled-edges needs one.
std::string edge_block_param(const nlohmann::json& params);

// The +0.0 values generate_inputs appends to `special` without n for a format that quantizes whole
// blocks only (FormatSpec::whole_blocks): up to the next multiple of its block_size; 0 otherwise. A
// zero never raises a block's absmax, so the 18 values keep the scale they have alone (their NaN
// makes it NaN), and the padding elements are compared like every other. With n the list is cycled
// to n values as asked, and a count that is not whole blocks is the reference's error.
std::size_t special_padding(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params);

}  // namespace lowbit
