#pragma once
// A kernel under review as the maker of a case's outputs (golden generate --kernel, audit --kernel):
// the kernel runs on the whole case (in a child process, host or CUDA memory, plugin_host.hpp), and
// nothing it made is trusted until a sample of its outputs equals the reference's bit for bit.
//
// The sample: when the case has at most `check_elements` elements (of its `input`, or an optimizer's
// `param`), the reference runs on the whole case and every output is compared. Above that, for a
// format whose tensors are cut along blocks of a flat layout (slicing() below), the reference runs on
// two sub-cases, the head (the first check_elements / 2 elements, whole blocks) and the tail (the last
// ones, whole blocks and the partial last block), and those parts of the kernel's outputs are compared:
// the head catches wrong arithmetic, the tail the indexing and grid bugs that show only at the end of a
// large tensor (the last block, the last thread block, 32-bit offsets). A format that cannot be cut
// (2-D tiles, a per-tensor scale, a table) is always checked whole. docs/golden-files.md#outputs-from-a-kernel.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lowbit/compare.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/verify.hpp"

namespace lowbit {

// How a format's cases are cut into sub-cases of whole blocks: the tensor the others follow
// ("input", or an optimizer's "param") and the unit every cut is a multiple of (the lcm of the
// blocks of every tensor that is cut, and 2 where 4-bit codes are packed two a byte).
struct Slicing {
  std::string root;
  std::size_t unit = 1;
};

// The slicing of `f` for a case with these params, or nullopt when its tensors cannot be cut (a tensor
// of any shape besides the root, a 2-D layout, a per-tensor scale, a transposed output).
std::optional<Slicing> slicing(const FormatSpec& f, const nlohmann::json& params);

// Elements [begin, end) of the root of `c` (a case of f, inputs only or complete) and the same part of
// every tensor that follows it: per-element tensors [begin, end), per-block ones their blocks, packed
// codes their bytes; scalars and tables whole. Every cut tensor comes out flat. begin is a multiple of
// s.unit, end too or the root's element count; std::invalid_argument otherwise.
Case slice_case(const FormatSpec& f, const Case& c, const Slicing& s, const nlohmann::json& params, std::size_t begin,
                std::size_t end);

// One part of the case held to the reference.
struct SampleCheck {
  std::string label;         // "all 4096 elements", "head: elements [0, 524288)", "tail: elements [..., n)"
  ComparisonReport report;   // the reference (expected) against the kernel's outputs, strict bit-exact
};

struct KernelCase {
  Case made;                        // the inputs and the kernel's outputs (trusted() only: else empty)
  std::string failure;              // the kernel crashed, hung or returned an error
  std::vector<SampleCheck> checks;  // what was held to the reference
  std::uint64_t elements = 0;       // of the root
  std::uint64_t checked = 0;        // elements of the root whose outputs were compared
  std::optional<double> kernel_ms;  // a CUDA kernel: the time between its CUDA events
  bool trusted() const;             // completed, and every check bit-identical
  std::string sample_text() const;  // "every element", or "elements [0, a) and [b, n) (head and tail blocks)"
};

// The kernel on the inputs of `inputs` (a case of f with its metadata, inputs only), then the checks
// above. PluginError when the plugin is unusable.
KernelCase run_checked_kernel(const KernelUnderReview& k, const FormatSpec& f, const Case& inputs,
                              std::uint64_t check_elements);

// The lines golden generate --kernel and audit --kernel print for a kernel's case: trusted,
// "checked  STEM: kernel K: every element bit-identical to the reference[, kernel 0.123 ms]" (no
// newline); refused, one line a differing tensor or the kernel's failure, each ending in a newline:
// "REFUSED  STEM: kernel K, head: elements [0, 2048): 'codes' 3 of 2048 elements differ from the
// reference (3 tie)".
std::string checked_line(const std::string& stem, const std::string& kernel, const KernelCase& kc);
std::string refusal_lines(const std::string& stem, const std::string& kernel, const KernelCase& kc);

// Whether a kernel of format f can stand for f's round trip in the audit: a quantizer that reads
// `input` and writes `dequant` (an optimizer step cannot).
bool kernel_round_trips(const FormatSpec& f);

// The audit's round trip through a kernel (audit --kernel): x (finite), zero-padded to whole blocks
// where the format's reference refuses a partial block (torchao's; its reference round trip pads so),
// with the format's default params at block_size and its auxiliary inputs (the default qmap), through
// run_checked_kernel; on success xhat holds the first x.size() values of the kernel's dequant.
KernelCase kernel_round_trip(const KernelUnderReview& k, const FormatSpec& f, std::span<const float> x, std::size_t block_size,
                             std::uint64_t check_elements, std::vector<float>& xhat);

}  // namespace lowbit
