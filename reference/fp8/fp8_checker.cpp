#include "lowbit/fp8_checker.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lowbit::fp8 {

DoubleChecker::DoubleChecker(FormatId format, Policy policy) : format_(format_info(format)), policy_(policy) {
  const int m = format_.mantissa_bits;
  // OCP field formula: exponent field 0 is subnormal (m * 2^(1-bias-m)), else (2^m + mantissa) * 2^(e-bias-m).
  for (int code = 0; code <= format_.max_finite; ++code) {
    const int e = code >> m;
    const int mantissa = code & ((1 << m) - 1);
    const double v = e == 0 ? std::ldexp(mantissa, 1 - format_.bias - m)
                            : std::ldexp((1 << m) + mantissa, e - format_.bias - m);
    values_.push_back(v);
  }
  const double top = values_[format_.max_finite];
  values_.push_back(top + (top - values_[format_.max_finite - 1]));  // one ulp past the largest finite
  values_.push_back(std::numeric_limits<double>::infinity());
  for (std::size_t i = 0; i + 1 < values_.size(); ++i)
    midpoints_.push_back(i + 2 < values_.size() ? (values_[i] + values_[i + 1]) / 2
                                                : std::numeric_limits<double>::infinity());
  midpoints_.push_back(std::numeric_limits<double>::infinity());
  min_normal_ = std::ldexp(1.0, 1 - format_.bias);
}

std::size_t DoubleChecker::interval_of(double v) const {
  return static_cast<std::size_t>(std::upper_bound(values_.begin(), values_.end(), v) - values_.begin()) - 1;
}

std::size_t DoubleChecker::rounded_stochastic(double v, std::uint32_t random_bits, std::size_t i) const {
  if (i + 1 >= values_.size() - 1) return i;
  // fraction of the way from values[i] to values[i+1]: exact (power-of-two gap, few-bit ends).
  const double fraction = (v - values_[i]) / (values_[i + 1] - values_[i]);
  const double top32 = std::floor(std::ldexp(fraction, 32));
  return top32 + random_bits >= 4294967296.0 ? i + 1 : i;
}

std::uint8_t DoubleChecker::nan_code(std::uint8_t sign) const {
  return static_cast<std::uint8_t>(policy_.nan.magnitude | (policy_.nan.keeps_sign ? sign : 0));
}

// A NaN made by overflow (or by +-Inf in a format without Inf) keeps the input's sign whatever the
// NaN encoding says of NaN inputs: fp8.hpp's NanEncoding.
std::uint8_t DoubleChecker::overflow_nan_code(std::uint8_t sign) const {
  return static_cast<std::uint8_t>(policy_.nan.magnitude | sign);
}

std::uint8_t DoubleChecker::overflow_code(std::uint8_t sign) const {
  switch (policy_.overflow) {
    case Overflow::SatFinite: return sign | format_.max_finite;
    case Overflow::Inf:
      if (format_.has_inf) return sign | format_.inf;  // S.11111.00 for E5M2
      break;
    case Overflow::NaN: break;
  }
  return overflow_nan_code(sign);
}

std::uint8_t DoubleChecker::code_for_non_finite(float x) const {
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return nan_code(sign);
  if (policy_.overflow == Overflow::SatFinite) return sign | format_.max_finite;
  if (format_.has_inf) return sign | format_.inf;  // an infinite input stays infinite
  return overflow_nan_code(sign);
}

std::uint8_t DoubleChecker::expected_nearest_even(float x) const {
  if (!std::isfinite(x)) return code_for_non_finite(x);
  const double v = std::fabs(static_cast<double>(x));
  return code_for(std::signbit(x), rounded_nearest_even(v, interval_of(v)));
}

std::uint8_t DoubleChecker::expected_stochastic(float x, std::uint32_t random_bits) const {
  if (!std::isfinite(x)) return code_for_non_finite(x);
  const double v = std::fabs(static_cast<double>(x));
  return code_for(std::signbit(x), rounded_stochastic(v, random_bits, interval_of(v)));
}

}  // namespace lowbit::fp8
