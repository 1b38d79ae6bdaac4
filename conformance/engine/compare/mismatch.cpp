#include "lowbit/mismatch.hpp"

#include <algorithm>
#include <cmath>

namespace lowbit {

std::string_view mismatch_class_name(MismatchClass c) {
  switch (c) {
    case MismatchClass::Tie: return "tie";
    case MismatchClass::NearBoundary: return "near-boundary";
    case MismatchClass::ScalePropagated: return "scale-propagated";
    case MismatchClass::FollowsCodes: return "follows-codes";
    case MismatchClass::LibraryRounding: return "library-rounding";
    case MismatchClass::ArithmeticVariant: return "arithmetic-variant";
    case MismatchClass::FlushedSubnormal: return "flushed-subnormal";
    case MismatchClass::NanEncoding: return "nan-encoding";
    case MismatchClass::Genuine: return "genuine";
  }
  return "?";
}

Explanation explain_neighbours(double y, double lo, double hi) {
  const double boundary = (lo + hi) / 2;  // exact: neighbouring code values are within a binade or two
  Explanation why;
  why.scaled = y;
  why.boundary = boundary;
  if (y == boundary) {
    why.cls = MismatchClass::Tie;
    return why;
  }
  int e = 0;
  std::frexp(std::fabs(boundary), &e);
  const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  why.cls = MismatchClass::NearBoundary;
  why.boundary_ulps = std::fabs(y - boundary) / ulp;
  return why;
}

bool is_subnormal_bits(DType d, std::uint64_t b) {
  switch (d) {
    case DType::F32: return (b & 0x7F800000u) == 0 && (b & 0x007FFFFFu) != 0;
    case DType::F16: return (b & 0x7C00u) == 0 && (b & 0x03FFu) != 0;
    case DType::BF16: return (b & 0x7F80u) == 0 && (b & 0x007Fu) != 0;
    case DType::F8_E4M3: return (b & 0x78u) == 0 && (b & 0x07u) != 0;
    case DType::F8_E5M2: return (b & 0x7Cu) == 0 && (b & 0x03u) != 0;
    default: return false;
  }
}
bool is_zero_bits(DType d, std::uint64_t b) {
  switch (d) {
    case DType::F32: return (b & 0x7FFFFFFFu) == 0;
    case DType::F16:
    case DType::BF16: return (b & 0x7FFFu) == 0;
    case DType::F8_E4M3:
    case DType::F8_E5M2: return (b & 0x7Fu) == 0;
    default: return false;
  }
}

bool flushed_alone(DType d, std::uint64_t expected, std::uint64_t actual, double expected_value, double rounded) {
  if (!is_zero_bits(d, actual) || !is_subnormal_bits(d, expected)) return false;
  const std::uint64_t sign = d == DType::F32 ? 0x80000000u : d == DType::F16 || d == DType::BF16 ? 0x8000u : 0x80u;
  const bool smallest = (expected & ~sign) == 1;
  return !(smallest && std::fabs(rounded) > 0 && std::fabs(rounded) < std::fabs(expected_value));
}

}  // namespace lowbit
