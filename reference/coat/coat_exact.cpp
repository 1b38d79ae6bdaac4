#include "lowbit/coat_exact.hpp"

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <algorithm>
#include <cmath>

#include "lowbit/coat_optimizer.hpp"
#include "lowbit/fp8.hpp"
#include "lowbit/oracle.hpp"

namespace lowbit::coat {

namespace {

using oracle::Exact;
// The transcendental steps need only 113 bits to decide a code: far more than a float32 code boundary
// asks for, and fast enough to run on hundreds of thousands of elements.
using Wide = boost::multiprecision::cpp_bin_float_quad;

Wide wide(float x) { return Wide(static_cast<double>(x)); }

// E4M3's largest finite value (448), and its ratio to the smallest subnormal (448 / 2^-9 = 229376).
Wide e4m3_max() { return wide(fp8::E4M3FN::max_value); }
Wide e4m3_range() { return e4m3_max() / wide(fp8::decode<fp8::E4M3FN>(0x01)); }

std::uint8_t round_to_e4m3(const Wide& y) {
  const fp8::FormatInfo info = fp8::format_info(fp8::FormatId::E4M3FN);
  const Exact magnitude(boost::multiprecision::abs(y));
  unsigned code = oracle::round_magnitude_nearest_even(magnitude, info);
  if (code > info.max_finite) code = info.max_finite;  // satfinite
  return static_cast<std::uint8_t>(code | (y < 0 ? 0x80u : 0u));
}

}  // namespace

ExactGroup expand_quantize_group_exact(std::span<const float> values, int expand_min) {
  const GroupStats st = expand_group_stats(values);
  const float a = static_cast<float>(static_cast<double>(st.max) + 1e-30);
  const float b = static_cast<float>(static_cast<double>(st.min) + 1e-30);
  ExactGroup g;
  const Wide ratio = wide(a) / wide(b);
  if (!(ratio > 1) || !std::isfinite(a)) {
    g.degenerate = true;
    return g;
  }
  const Wide e = expand_min;
  // 100352: the kernel's ratioUpperBound (448 * 448 / 2), written as it writes it
  const Wide k = boost::multiprecision::floor(e * boost::multiprecision::log(Wide(100352)) /
                                              boost::multiprecision::log(ratio)) / e;
  g.k = static_cast<double>(k);
  for (float x : values) {
    Wide y = 0;
    if (x != 0 && !std::isnan(x))
      y = e4m3_max() * boost::multiprecision::pow(boost::multiprecision::abs(wide(x)) / wide(a), k);
    if (std::signbit(x)) y = -y;
    g.y.push_back(static_cast<double>(y));
    g.codes.push_back(std::isnan(x) ? 0x7F : round_to_e4m3(y));
  }
  return g;
}

double expand_dequantize_exact(std::uint8_t code, double k, float group_max_plus) {
  const double value = static_cast<double>(fp8::decode<fp8::E4M3FN>(code));
  const Wide magnitude =
      boost::multiprecision::pow(Wide(std::fabs(value)) / e4m3_max(), Wide(1) / Wide(k)) * wide(group_max_plus);
  return static_cast<double>(std::signbit(value) ? -magnitude : magnitude);
}

PaperGroup paper_quantize_group(std::span<const float> values) {
  float max = 0, min = INFINITY;
  for (float x : values) {
    const float a = std::fabs(x);
    if (std::isnan(a) || a == 0) continue;
    max = std::max(max, a);
    min = std::min(min, a);
  }
  PaperGroup g;
  g.max = max;
  if (max > min && std::isfinite(max))
    g.k = static_cast<double>(boost::multiprecision::log(e4m3_range()) / boost::multiprecision::log(wide(max) / wide(min)));
  for (float x : values) {
    if (std::isnan(x)) {
      g.codes.push_back(0x7F);
      continue;
    }
    Wide y = 0;
    if (x != 0 && max > 0) y = e4m3_max() * boost::multiprecision::pow(boost::multiprecision::abs(wide(x)) / wide(max), Wide(g.k));
    if (std::signbit(x)) y = -y;
    g.codes.push_back(round_to_e4m3(y));
  }
  return g;
}

double paper_dequantize(std::uint8_t code, const PaperGroup& g) {
  const double value = static_cast<double>(fp8::decode<fp8::E4M3FN>(code));
  const Wide magnitude = boost::multiprecision::pow(Wide(std::fabs(value)) / e4m3_max(), Wide(1) / Wide(g.k)) * Wide(g.max);
  return static_cast<double>(std::signbit(value) ? -magnitude : magnitude);
}

}  // namespace lowbit::coat
