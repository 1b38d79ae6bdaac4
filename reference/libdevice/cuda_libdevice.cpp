// libdevice log2f / powf step by step (docs/formats/coat-optimizer.md#libdevice-log2f-and-powf-cuda-130).
// Every line is one binary32 operation rounded to nearest; fma is one rounding. Compiled with
// -ffp-contract=off like the whole reference.
#include "lowbit/cuda_libdevice.hpp"

#include <cmath>
#include <initializer_list>

#include "lowbit/float_bits.hpp"

namespace lowbit::cuda {

namespace {

float f(std::uint32_t bits) { return float_from_bits(bits); }

constexpr float kTwo23 = 8388608.0f;         // 2^23
constexpr float kTwoMinus23 = 1.0f / kTwo23;  // 2^-23, exact
constexpr float kMinNormal = 1.17549435e-38f; // 2^-126

struct Split {
  float m, e;  // x = m * 2^e with m in [0.7071, 1.4142)
};

// Shared by log2f and powf: subtract the exponent relative to sqrt(1/2) with integer arithmetic.
Split split(float x, float exponent_bias) {
  const std::uint32_t i = bits_of(x);
  const std::uint32_t ie = (i - 0x3F3504F3u) & 0xFF800000u;
  const float m = float_from_bits(i - ie);
  const auto ie_signed = static_cast<std::int32_t>(ie);  // a multiple of 2^23: exact as a float
  return {m, std::fma(static_cast<float>(ie_signed), kTwoMinus23, exponent_bias)};
}

}  // namespace

float canonical(float x) { return std::isnan(x) ? float_from_bits(kCanonicalNan) : x; }

float log2f(float x) {
  float xs = x, eb = 0.0f;
  if (x < kMinNormal) {  // a signed compare: negative values take this branch too
    xs = x * kTwo23;
    eb = -23.0f;
  }
  const std::uint32_t i = bits_of(xs);
  const Split s = split(xs, eb);
  const float t = s.m - 1.0f;
  float p = f(0x3DC6B27Fu);
  for (std::uint32_t k : {0xBE2C7F30u, 0x3E2FCF2Au, 0xBE374E43u, 0x3E520BF4u, 0xBE763C8Bu, 0x3E93BF99u, 0xBEB8AA49u,
                          0x3EF6384Au, 0xBF38AA3Bu})
    p = std::fma(p, t, f(k));
  const float r = t * (t * p);
  float result = s.e + std::fma(t, f(0x3FB8AA3Bu), r);
  if (i >= 0x7F800000u) result = canonical(std::fma(xs, INFINITY, INFINITY));  // inf, NaN, negative
  if (xs == 0.0f) result = -INFINITY;                                           // checked last
  return result;
}

float rcp_approx_ftz(float b) {
  const std::uint32_t x = bits_of(b);
  return float_from_bits(rcp_approx_ftz_scaled_bits(x, rcp_approx_ftz_1_2(x & 0x007FFFFFu)));
}

float rcp_approx_ftz_scaled(const std::uint32_t* results_1_2, float b) {
  const std::uint32_t x = bits_of(b);
  return float_from_bits(rcp_approx_ftz_scaled_bits(x, results_1_2[x & 0x007FFFFFu]));
}

namespace {

// powf's core for finite positive |x| and finite y: log2 in double-float, times y, then 2^.
float pow_core(float ax, float y, ReciprocalFn reciprocal) {
  float eb = 0.0f;
  if (ax < kMinNormal) {
    ax = ax * 16777216.0f;  // 2^24
    eb = -24.0f;
  }
  const Split s = split(ax, eb);
  const float a = s.m - 1.0f;
  const float b = s.m + 1.0f;
  const float r = reciprocal(b);
  const float u = (a + a) * r;
  const float u2 = u * u;
  const float d2 = (a - u) * 2.0f;
  const float cr = r * std::fma(-u, a, d2);
  const float q = std::fma(std::fma(std::fma(f(0x3A2C32E4u), u2, f(0x3B52E7DBu)), u2, f(0x3C93BB73u)), u2,
                           f(0x3DF6384Fu)) * u2;
  const float L = f(0x3FB8AA3Bu);
  const float hi = std::fma(u, L, s.e);
  float lo = std::fma(u, L, s.e - hi);
  lo = std::fma(cr, L, lo);
  lo = std::fma(u, f(0x32A55E34u), lo);
  lo = std::fma(q * 3.0f, cr, lo);
  lo = std::fma(q, u, lo);
  const float sh = hi + lo;
  const float sl = lo - (sh - hi);
  const float P = sh * y;
  const float Pl = std::fma(sl, y, std::fma(sh, y, -P));
  if (!(std::fabs(P) <= 152.0f)) return P < 0.0f ? 0.0f : INFINITY;
  const float n = std::nearbyint(P);  // ties to even under the default rounding mode
  const float g = Pl + (P - n);
  float e = f(0x391FCB8Eu);
  for (std::uint32_t k : {0x3AAF85EDu, 0x3C1D9856u, 0x3D6357BBu, 0x3E75FDECu, 0x3F317218u, 0x3F800000u})
    e = std::fma(e, g, f(k));
  // 2^n in two factors, so that neither overflows nor goes subnormal on the way
  const std::uint32_t K = n > 0.0f ? 0u : 0x83000000u;
  const auto shifted = static_cast<std::uint32_t>(static_cast<std::int32_t>(n)) << 23;
  return (e * float_from_bits(K + 0x7F000000u)) * float_from_bits(shifted - K);
}

}  // namespace

float powf(float x, float y, ReciprocalFn reciprocal) {
  const float yodd = std::fabs(y - 2.0f * std::trunc(y * 0.5f));
  if (x == 1.0f || y == 0.0f) return 1.0f;
  if (std::isnan(x) || std::isnan(y)) return canonical(x + y);
  if (x == 0.0f || std::isinf(x)) {
    std::uint32_t t = bits_of(x + x);
    if (y < 0.0f) t ^= 0x7F800000u;  // 0 <-> inf
    if (yodd != 1.0f) t &= 0x7FFFFFFFu;
    return float_from_bits(t);
  }
  if (x == -1.0f && std::isinf(y)) return 1.0f;
  const float R = pow_core(std::fabs(x), y, reciprocal);
  if (x > 0.0f) return R;
  if (std::trunc(y) != y) return float_from_bits(kCanonicalNan);
  return yodd == 1.0f ? -R : R;
}

}  // namespace lowbit::cuda
