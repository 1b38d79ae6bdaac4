#include "lowbit/mismatch.hpp"

#include <algorithm>
#include <cmath>

namespace lowbit {

std::string_view mismatch_class_name(MismatchClass c) {
  switch (c) {
    case MismatchClass::Tie: return "tie";
    case MismatchClass::NearBoundary: return "near-boundary";
    case MismatchClass::ScalePropagated: return "scale-propagated";
    case MismatchClass::LibraryRounding: return "library-rounding";
    case MismatchClass::Genuine: return "genuine";
  }
  return "?";
}

Explanation explain_neighbours(double y, double lo, double hi) {
  const double boundary = (lo + hi) / 2;  // exact: neighbouring code values are within a binade or two
  if (y == boundary) return {MismatchClass::Tie, 0};
  int e = 0;
  std::frexp(std::fabs(boundary), &e);
  const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return {MismatchClass::NearBoundary, std::fabs(y - boundary) / ulp};
}

}  // namespace lowbit
