#pragma once
// An independent FP8 checker: the expected code of a float32 input found by a nearest search over
// the format's value table in double precision. Doubles hold every binary32, every FP8 value and
// every midpoint between neighbours exactly, so the search is exact. It shares no code with the
// bit-level encoder in fp8.hpp; the multiprecision oracle validates it (conformance/tests/test_oracle.cpp).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "lowbit/fp8.hpp"

namespace lowbit::fp8 {

class DoubleChecker {
 public:
  DoubleChecker(FormatId format, Policy policy);

  const FormatInfo& format() const { return format_; }
  // values()[c] is the value of magnitude code c for c <= max_finite, computed from the OCP field
  // formula; values()[max_finite + 1] is the first magnitude past the largest finite one (one more
  // ulp: 480 for E4M3FN, 65536 for E5M2), and the last entry is +infinity as a sentinel.
  const std::vector<double>& values() const { return values_; }
  double min_normal() const { return min_normal_; }

  // The interval index i with values[i] <= v < values[i+1], for finite v >= 0.
  std::size_t interval_of(double v) const;
  // The same, walking forward from a hint known to be <= the answer (sweeps in increasing order).
  std::size_t advance(std::size_t hint, double v) const {
    while (v >= values_[hint + 1]) ++hint;
    return hint;
  }
  // True when v lies exactly half-way between the two ends of interval i.
  bool is_midpoint(double v, std::size_t i) const { return v == midpoints_[i]; }

  // Rounded magnitude index of a finite v >= 0 lying in interval i; any index above max_finite
  // means the value overflows. Inline: the sweeps call these for every input.
  std::size_t rounded_nearest_even(double v, std::size_t i) const {
    if (v < midpoints_[i]) return i;
    if (v > midpoints_[i]) return i + 1;
    return (i % 2 == 0) ? i : i + 1;  // a tie goes to the even code
  }
  std::size_t rounded_stochastic(double v, std::uint32_t random_bits, std::size_t i) const;
  // The code for a rounded magnitude index under the policy (overflow handled here).
  std::uint8_t code_for(bool negative, std::size_t magnitude) const {
    const std::uint8_t sign = negative ? 0x80 : 0x00;
    return magnitude <= format_.max_finite ? static_cast<std::uint8_t>(sign | magnitude) : overflow_code(sign);
  }
  // The code for a NaN or infinite input.
  std::uint8_t code_for_non_finite(float x) const;

  // Whole conversions, for single inputs (tests, reports).
  std::uint8_t expected_nearest_even(float x) const;
  std::uint8_t expected_stochastic(float x, std::uint32_t random_bits) const;

 private:
  std::uint8_t overflow_code(std::uint8_t sign) const;
  std::uint8_t nan_code(std::uint8_t sign) const;  // of a NaN input
  std::uint8_t overflow_nan_code(std::uint8_t sign) const;

  FormatInfo format_;
  Policy policy_;
  std::vector<double> values_;
  // midpoints_[i] = (values_[i] + values_[i+1]) / 2, exact; +infinity where no rounding happens
  // (the intervals at and past the first overflow magnitude).
  std::vector<double> midpoints_;
  double min_normal_;
};

}  // namespace lowbit::fp8
