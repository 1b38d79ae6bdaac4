#include "lowbit/oracle.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

namespace lowbit::oracle {

namespace {

// Exact m * 2^e.
Exact scaled(std::int64_t m, int e) { return boost::multiprecision::ldexp(Exact(m), e); }

struct Table {
  std::vector<Exact> values;  // values[c] for magnitude codes 0..max_finite, then one ulp past the top
};

// Every finite magnitude by the OCP formula, then the first one past the top: the largest finite
// value plus one ulp of its binade (480 for E4M3FN, 65536 for E5M2).
Table build_table(const fp8::FormatInfo& f) {
  Table t;
  for (unsigned c = 0; c <= f.max_finite; ++c) t.values.push_back(exact_fp8_value(static_cast<std::uint8_t>(c), f));
  const int top_exponent = f.max_finite >> f.mantissa_bits;
  t.values.push_back(t.values.back() + scaled(1, top_exponent - f.bias - f.mantissa_bits));
  return t;
}

const Table& table_of(const fp8::FormatInfo& f) {
  return fp8::dispatch(f.id, [](auto traits) -> const Table& {
    static const Table table = build_table(fp8::format_info(decltype(traits)::id));
    return table;
  });
}

// The Inf magnitude by the OCP field rule: every exponent bit set, mantissa zero.
unsigned inf_magnitude(const fp8::FormatInfo& f) { return ((1u << f.exponent_bits) - 1) << f.mantissa_bits; }

// Index i with values[i] <= m < values[i+1], or values.size()-1 when m is at or past the last entry.
std::size_t bracket(const std::vector<Exact>& v, const Exact& m) {
  std::size_t i = 0;
  while (i + 1 < v.size() && v[i + 1] <= m) ++i;
  return i;
}

std::uint8_t nan_code(bool negative, const fp8::Policy& p) {
  return static_cast<std::uint8_t>(p.nan.magnitude | (p.nan.keeps_sign && negative ? 0x80 : 0));
}

// A NaN made by overflow keeps the input's sign in every implementation (fp8.hpp, NanEncoding).
std::uint8_t overflow_nan_code(bool negative, const fp8::Policy& p) {
  return static_cast<std::uint8_t>(p.nan.magnitude | (negative ? 0x80 : 0));
}

std::uint8_t finish(bool negative, unsigned magnitude, const fp8::FormatInfo& f, const fp8::Policy& p) {
  if (magnitude <= f.max_finite) return static_cast<std::uint8_t>((negative ? 0x80 : 0) | magnitude);
  if (p.overflow == fp8::Overflow::SatFinite) return static_cast<std::uint8_t>((negative ? 0x80 : 0) | f.max_finite);
  if (p.overflow == fp8::Overflow::Inf && f.has_inf) return static_cast<std::uint8_t>((negative ? 0x80 : 0) | inf_magnitude(f));
  return overflow_nan_code(negative, p);
}

std::uint8_t non_finite(float x, const fp8::FormatInfo& f, const fp8::Policy& p) {
  if (std::isnan(x)) return nan_code(std::signbit(x), p);
  if (p.overflow == fp8::Overflow::SatFinite) return static_cast<std::uint8_t>((x < 0 ? 0x80 : 0) | f.max_finite);
  if (f.has_inf) return static_cast<std::uint8_t>((x < 0 ? 0x80 : 0) | inf_magnitude(f));
  return overflow_nan_code(x < 0, p);
}

}  // namespace

Exact exact_value(float x) {
  if (!std::isfinite(x)) throw std::domain_error("exact_value: not a finite float");
  int e = 0;
  const float frac = std::frexp(x, &e);  // x = frac * 2^e, |frac| in [0.5, 1): frac * 2^24 is an integer
  return scaled(static_cast<std::int64_t>(std::ldexp(frac, 24)), e - 24);
}

bool fp8_is_nan(std::uint8_t code, const fp8::FormatInfo& f) {
  const unsigned magnitude = code & 0x7Fu;
  const unsigned all_exponent = inf_magnitude(f);
  const unsigned mantissa_mask = (1u << f.mantissa_bits) - 1;
  if (f.has_inf) return (magnitude & all_exponent) == all_exponent && (magnitude & mantissa_mask) != 0;
  return magnitude == 0x7Fu;  // E4M3FN: only S.1111.111 is NaN; the rest of the top binade is finite
}

bool fp8_is_inf(std::uint8_t code, const fp8::FormatInfo& f) { return f.has_inf && (code & 0x7Fu) == inf_magnitude(f); }

Exact exact_fp8_value(std::uint8_t code, const fp8::FormatInfo& f) {
  if (fp8_is_nan(code, f) || fp8_is_inf(code, f)) throw std::domain_error("exact_fp8_value: not a finite code");
  const int exponent = (code & 0x7F) >> f.mantissa_bits;
  const int mantissa = code & ((1 << f.mantissa_bits) - 1);
  // (-1)^s * 2^(1-bias) * (0.mantissa) for exponent 0; (-1)^s * 2^(e-bias) * (1.mantissa) otherwise.
  Exact v = exponent == 0 ? scaled(mantissa, 1 - f.bias - f.mantissa_bits)
                          : scaled((1 << f.mantissa_bits) + mantissa, exponent - f.bias - f.mantissa_bits);
  return (code & 0x80) ? Exact(-v) : v;
}

unsigned round_magnitude_nearest_even(const Exact& m, const fp8::FormatInfo& f) {
  const auto& v = table_of(f).values;
  const std::size_t i = bracket(v, m);
  if (i + 1 >= v.size()) return static_cast<unsigned>(i);  // at or past one ulp beyond the top
  const Exact mid = (v[i] + v[i + 1]) / 2;
  if (m < mid) return static_cast<unsigned>(i);
  if (m > mid) return static_cast<unsigned>(i + 1);
  return static_cast<unsigned>(i % 2 == 0 ? i : i + 1);
}

unsigned round_magnitude_stochastic(const Exact& m, std::uint32_t random_bits, const fp8::FormatInfo& f) {
  const auto& v = table_of(f).values;
  const std::size_t i = bracket(v, m);
  if (i + 1 >= v.size()) return static_cast<unsigned>(i);
  const Exact top32 = floor(ldexp((m - v[i]) / (v[i + 1] - v[i]), 32));
  return top32 + random_bits >= scaled(1, 32) ? static_cast<unsigned>(i + 1) : static_cast<unsigned>(i);
}

std::uint8_t to_fp8_nearest_even(float x, const fp8::FormatInfo& f, const fp8::Policy& p) {
  if (!std::isfinite(x)) return non_finite(x, f, p);
  return finish(std::signbit(x), round_magnitude_nearest_even(abs(exact_value(x)), f), f, p);
}

std::uint8_t to_fp8_stochastic(float x, std::uint32_t random_bits, const fp8::FormatInfo& f, const fp8::Policy& p) {
  if (!std::isfinite(x)) return non_finite(x, f, p);
  return finish(std::signbit(x), round_magnitude_stochastic(abs(exact_value(x)), random_bits, f), f, p);
}

std::vector<Exact> fp8_midpoints(const fp8::FormatInfo& f) {
  const auto& v = table_of(f).values;
  std::vector<Exact> mids;
  for (std::size_t i = 0; i + 1 < v.size(); ++i) mids.push_back((v[i] + v[i + 1]) / 2);
  return mids;
}

float round_to_f32(const Exact& x) {
  if (x == 0) return 0.0f;
  const bool negative = x < 0;
  const Exact m = abs(x);
  int e = 0;
  frexp(m, &e);  // m = frac * 2^e with frac in [0.5, 1)
  // ulp exponent: 24 significant bits in the binade, but never finer than 2^-149 (gradual underflow).
  const int ulp_exp = std::max(e - 24, -149);
  Exact q = ldexp(m, -ulp_exp);  // m in ulps
  Exact n = floor(q);
  const Exact rest = q - n;
  if (rest > Exact(0.5) || (rest == Exact(0.5) && fmod(n, Exact(2)) != 0)) n += 1;
  const Exact r = ldexp(n, ulp_exp);
  const float out = r >= ldexp(Exact(1), 128) ? INFINITY : static_cast<float>(r);  // r is exact in binary32
  return negative ? -out : out;
}

Exact ulp_error(float got, const Exact& exact) {
  const Exact m = abs(exact);
  int e = 0;
  if (m != 0) frexp(m, &e);
  const int ulp_exp = m == 0 ? -149 : std::max(e - 24, -149);
  return ldexp(abs(exact_value(got) - exact), -ulp_exp);
}

}  // namespace lowbit::oracle
