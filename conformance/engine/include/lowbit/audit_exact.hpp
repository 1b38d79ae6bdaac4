#pragma once
// Tensors that are already quantized: a state saved as the dequantized values of a format comes back
// from that format's round trip, at its own block size, unchanged in most of its blocks, and the
// audit then shows a false optimum there (docs/audit.md, "Already-quantized states"). Not in every
// block: torchao's and bitsandbytes' signed maps end at 1 but start above -1 (signed8's lowest entry
// is -0.99297), so a block whose largest magnitude is negative comes back with a smaller absmax and
// every value moves; a block led by a positive value, and every block of an unsigned map or of E4M3
// (symmetric), comes back exactly. Unquantized float data has practically no such block.
#include <span>
#include <string>
#include <vector>

#include "lowbit/formats.hpp"

namespace lowbit::audit {

struct ExactRoundTrip {
  const FormatSpec* format = nullptr;
  std::size_t block_size = 0;
  std::size_t exact_blocks = 0;  // blocks with a nonzero value that come back unchanged (x - x^ = 0)
  std::size_t blocks = 0;        // blocks with a nonzero value
};

// A configuration is reported when at least this share of its blocks with a nonzero value come back
// unchanged (all-zero blocks come back as zeros nearly everywhere and say nothing).
inline constexpr double kExactShare = 0.25;

// Per format (of those given, in their order), the block size (a power of two in kMinBlock..kMaxBlock
// where the format's round trip runs on x) whose round trip gives back the largest share of x's
// nonzero blocks unchanged, when that share is at least kExactShare; formats with none are left out.
// One block size per format: at half the state's own block size the halves led by its absmax come
// back too (half the share), at twice it nearly none. x must be finite (std::invalid_argument
// otherwise). Cheap on data that is not quantized: each configuration is tried on its first 16 blocks
// before the whole tensor.
std::vector<ExactRoundTrip> exact_round_trips(std::span<const float> x, const std::vector<const FormatSpec*>& formats);

// The warning for an input with exact round trips (exact non-empty), named as the caller writes it:
// "NAME looks already quantized: F at block B gives E of its N nonzero blocks back unchanged, ...". One
// text for lowbit audit's stderr and reports and the Python package's audit_state.
std::string exact_warning(const std::string& name, const std::vector<ExactRoundTrip>& exact);

}  // namespace lowbit::audit
