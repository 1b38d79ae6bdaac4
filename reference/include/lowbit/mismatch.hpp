#pragma once
// The vocabulary of a mismatch between an expected and an actual element: its class (why the bits
// differ) and, for a rounding-boundary difference, how far the quantizer's input lay from the
// boundary. Formats' explainers produce it; comparison counts it and the tolerance policy judges it
// (docs/tolerance-policy.md defines each class).
#include <string_view>

namespace lowbit {

enum class MismatchClass { Tie, NearBoundary, ScalePropagated, LibraryRounding, Genuine };
inline constexpr MismatchClass kMismatchClasses[] = {MismatchClass::Tie, MismatchClass::NearBoundary,
                                                     MismatchClass::ScalePropagated, MismatchClass::LibraryRounding,
                                                     MismatchClass::Genuine};
std::string_view mismatch_class_name(MismatchClass c);

struct Explanation {
  MismatchClass cls = MismatchClass::Genuine;
  double boundary_ulps = 0;  // NearBoundary: distance of the quantizer's input from the boundary, binary32 ulps
};

// A mismatch between neighbouring codes whose values are lo < hi: a tie when the quantizer's
// normalized input y lies exactly on their midpoint, else near-boundary with y's distance from it in
// binary32 ulps (at the midpoint's binade).
Explanation explain_neighbours(double y, double lo, double hi);

}  // namespace lowbit
