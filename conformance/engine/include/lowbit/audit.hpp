#pragma once
// Round-trip error audit: a tensor through a registered format's round trip (its reference
// quantize -> dequantize, FormatSpec::round_trip) at a given block size, and the error measures of
// the result (docs/audit.md defines each one). Deterministic: the work is split into fixed chunks of
// whole blocks, per-block sums are combined in block order, so the numbers are the same bytes for
// any thread count. Inputs come from generators.hpp (parse_input_spec, generate_inputs).
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "lowbit/formats.hpp"

namespace lowbit::audit {

inline constexpr std::size_t kMinBlock = 16, kMaxBlock = 65536;  // what --block-sizes accepts

// The formats with a round trip matching any of the names or globs (every one when there are none),
// in registry order; std::invalid_argument naming what matches nothing and listing what exists.
std::vector<const FormatSpec*> formats(const std::vector<std::string>& globs = {});

// Empty when the format's round trip applies at this block size to a tensor with (or without) a
// negative value, else why not ("n/a (COAT groups are 128)", "n/a (unsigned map: ...)").
std::string not_applicable(const FormatSpec& f, std::size_t block_size, bool has_negative);

// The dequantized values of x after the format's round trip at block_size (x finite; the round trip
// must apply). torchao formats zero-pad a partial tail block (docs/audit.md).
std::vector<float> round_trip(const FormatSpec& f, std::span<const float> x, std::size_t block_size, int threads = 1);

struct Metrics {
  std::size_t n = 0, blocks = 0;
  bool is_signed = false;      // the data has a negative value
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
  double bits_per_element = 0; // what the format stores per element (audit_storage.hpp); set by audit() only
};

// The measures of x^ against x over blocks of block_size (the last block may be partial).
Metrics measure(std::span<const float> x, std::span<const float> xhat, std::size_t block_size, int threads = 1);

// A tensor checked once for every configuration of an audit: finite (std::invalid_argument
// counting the values that are not), and whether it has a negative value.
struct Input {
  std::span<const float> x;
  bool has_negative = false;
};
Input checked_input(std::span<const float> x);

// round_trip and measure in one pass, chunk by chunk (no full-size copy of x^).
Metrics audit(const FormatSpec& f, const Input& in, std::size_t block_size, int threads = 1);
Metrics audit(const FormatSpec& f, std::span<const float> x, std::size_t block_size, int threads = 1);  // checks x first

// A round trip in place of the format's (audit --kernel: a kernel's quantize then dequantize), given
// the whole tensor at once: the x.size() values of x^.
using WholeRoundTrip = std::function<std::vector<float>(std::span<const float> x, std::size_t block_size)>;
// audit with that round trip: the same checks of x and the block size, the same measures.
Metrics audit(const FormatSpec& f, std::span<const float> x, std::size_t block_size, int threads,
              const WholeRoundTrip& round_trip);

// One measurement of an audit: an input, a format, a block size, and the measures, or why the
// format does not run there (note, "n/a (...)").
struct Row {
  std::string input;
  const FormatSpec* format = nullptr;
  std::size_t block = 0;
  std::string note;  // non-empty: not run, and why
  Metrics m;
  std::string ran_on = "reference";  // what ran the round trip: the reference, or "kernel NAME" (audit --kernel)
};

// The values of an input spec for the audit (generators.hpp kinds; edges, which belong to one format,
// are refused). std::invalid_argument on a bad spec.
// threads make the values (generate_inputs): the same for any count.
std::vector<float> make_input(const std::string& spec, int threads = 1);
// The parse of make_input alone (no values made): std::invalid_argument on a bad spec.
void check_input(const std::string& spec);

}  // namespace lowbit::audit
