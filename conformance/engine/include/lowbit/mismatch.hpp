#pragma once
// The vocabulary of a mismatch between an expected and an actual element: its class (why the bits
// differ), for a rounding-boundary difference how far the quantizer's input lay from the boundary,
// for an arithmetic variant which one reproduces the actual bits, and where the format has them the
// element's input, scaled value, nearest boundary and block scale. Formats' explainers produce it;
// comparison counts it and the tolerance policy judges it (docs/tolerance-policy.md defines each class).
#include <cstdint>
#include <optional>
#include <string_view>

#include "lowbit/dtype.hpp"

namespace lowbit {

// Genuine stays last: reports list the classes in this order.
enum class MismatchClass {
  Tie,
  NearBoundary,
  ScalePropagated,
  FollowsCodes,       // a stored form of the codes (torchao's packed 4-bit pairs) that only repeats a codes mismatch
  LibraryRounding,
  ArithmeticVariant,  // another arithmetic (reciprocal, unfused multiply-add) reproduces the actual bits
  FlushedSubnormal,   // zero where a subnormal was expected, or a subnormal input taken as zero
  NanEncoding,        // NaN against NaN with other bits (sign or payload)
  Genuine
};
inline constexpr MismatchClass kMismatchClasses[] = {
    MismatchClass::Tie,          MismatchClass::NearBoundary,      MismatchClass::ScalePropagated,
    MismatchClass::FollowsCodes, MismatchClass::LibraryRounding,   MismatchClass::ArithmeticVariant,
    MismatchClass::FlushedSubnormal, MismatchClass::NanEncoding,   MismatchClass::Genuine};
std::string_view mismatch_class_name(MismatchClass c);

struct Explanation {
  MismatchClass cls = MismatchClass::Genuine;
  // NearBoundary (and a Genuine that lies farther from its boundary than the policy's budget):
  // distance of the quantizer's input from the boundary, binary32 ulps
  double boundary_ulps = 0;
  std::string_view variant;  // ArithmeticVariant: "reciprocal", "division", "unfused-fma" (static strings)
  // What the quantizer saw, where the format has it: the element's input, the value it scaled it to
  // (the reference's arithmetic), the decision boundary nearest to that value between the expected and
  // the actual code, and the block's scale.
  std::optional<double> input, scaled, boundary, scale;
  // The element's code differs (a code, or a value dequantized from a code): its class is the code's,
  // decided by the explainer, and the comparison adds no cause of its own (a zero dequantized from
  // another code, where the reference's value is subnormal, is no flush).
  bool from_code = false;
};

// An explanation of class c alone (an arithmetic variant with its name).
inline Explanation classed(MismatchClass c, std::string_view variant = {}) {
  Explanation e;
  e.cls = c;
  e.variant = variant;
  return e;
}

// A mismatch between neighbouring codes whose values are lo < hi: a tie when the quantizer's
// normalized input y lies exactly on their midpoint, else near-boundary with y's distance from it in
// binary32 ulps (at the midpoint's binade). The boundary is recorded.
Explanation explain_neighbours(double y, double lo, double hi);

// Whether an element's bits (in the low bits of b) are a subnormal of its float or FP8 dtype, or a
// zero of either sign; integer and index dtypes have neither.
bool is_subnormal_bits(DType d, std::uint64_t b);
bool is_zero_bits(DType d, std::uint64_t b);

// Whether a zero (actual) where a subnormal was expected is a flush alone: not where rounding reaches
// zero as well, that is where the expected element is the smallest subnormal and the value the
// quantizer rounded lies strictly between zero and it (a kernel rounding toward zero, or through a
// narrower format first): zero is its neighbour there, and the pair is a tie or near the boundary.
bool flushed_alone(DType d, std::uint64_t expected, std::uint64_t actual, double expected_value, double rounded);

}  // namespace lowbit
