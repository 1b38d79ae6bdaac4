#pragma once
// The exact mathematics of COAT's Dynamic Range Expansion, for the oracle study: the same group
// statistics A = max + 1e-30 and B = min + 1e-30 the kernel computes (so only rounding differs),
// then every later step in Boost.Multiprecision (256 bits) and one final rounding to E4M3.
// In exact arithmetic the centre cancels: t / s = sign(x) * 448 * (|x| / A)^k, and the dequantized
// value is sign * (code / 448)^(1/k) * A.
#include <cstdint>
#include <span>
#include <vector>

namespace lowbit::coat {

struct ExactGroup {
  bool degenerate = false;        // R = A / B <= 1: k is not finite and positive; nothing else is set
  double k = 0;                   // floor(E * log(100352) / log(R)) / E, exactly (a multiple of 1/E)
  std::vector<double> y;          // sign(x) * 448 * (|x| / A)^k, the value the code rounds (to double)
  std::vector<std::uint8_t> codes;  // y rounded once to E4M3, nearest even, saturating
};

// Paper math on the kernel's own statistics (from expand_group_stats) for the study's comparison.
ExactGroup expand_quantize_group_exact(std::span<const float> values, int expand_min);

// The exact dequantized value of a code: sign * (|code value| / 448)^(1/k) * A.
double expand_dequantize_exact(std::uint8_t code, double k, float group_max_plus);

// The README / paper mathematics (NVlabs/COAT 80ec99f README.md lines 133-145; docs/formats/coat.md),
// exactly: over the group's true maximum and its true minimum nonzero magnitude (NaN ignored, no
// cap, no 1e-30), k = log(448 / 2^-9) / log(max / min) unrounded, f(x) = sign(x) |x|^k scaled so the
// maximum maps to 448 (and the minimum to 2^-9): y = sign(x) 448 (|x| / max)^k, rounded once to E4M3
// (satfinite); dequantized as sign (|code| / 448)^(1/k) max. A group with max = min (or no nonzero)
// keeps k = 1.
struct PaperGroup {
  double k = 1, max = 0;
  std::vector<std::uint8_t> codes;
};
PaperGroup paper_quantize_group(std::span<const float> values);
double paper_dequantize(std::uint8_t code, const PaperGroup& group);

}  // namespace lowbit::coat
