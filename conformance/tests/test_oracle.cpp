// The multiprecision oracle validates the double-precision checker that the exhaustive sweeps
// trust: on every float32 within two ulps of every rounding boundary, and on random patterns.
// The oracle's own binary32 rounding is held against the hardware's double->float conversion.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include "bits_printer.hpp"
#include "lowbit/fp8_checker.hpp"
#include "lowbit/fp8_sweep.hpp"
#include "lowbit/oracle.hpp"

using namespace lowbit;
using namespace lowbit::fp8;
using namespace lowbit::test;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

std::vector<Policy> policies_for(FormatId id) {
  std::vector<Policy> out;
  for (Overflow o : {Overflow::SatFinite, Overflow::NaN, Overflow::Inf}) out.push_back({o, kTorchNan});
  out.push_back(cuda_satfinite());
  out.push_back(dispatch(id, [](auto traits) { return cuda_nosat<decltype(traits)>(); }));
  out.push_back({Overflow::Inf, dispatch(id, [](auto traits) { return kMlDtypesNan<decltype(traits)>; })});
  return out;
}

void check_checker_matches_oracle(FormatId id, const Policy& p, float x, std::uint32_t r) {
  const DoubleChecker checker(id, p);
  const FormatInfo info = format_info(id);
  CAPTURE(bits(x));
  CAPTURE(r);
  CHECK(fp8_code(checker.expected_nearest_even(x), id) == fp8_code(oracle::to_fp8_nearest_even(x, info, p), id));
  CHECK(fp8_code(checker.expected_stochastic(x, r), id) == fp8_code(oracle::to_fp8_stochastic(x, r, info, p), id));
}

}  // namespace

TEST_CASE("checker equals the oracle within two ulps of every midpoint and the overflow threshold") {
  for (FormatId id : kFormats) {
    const FormatInfo info = format_info(id);
    const auto mids = oracle::fp8_midpoints(info);
    CHECK(mids.size() == std::size_t(info.max_finite) + 1);
    for (const Policy& p : policies_for(id)) {
      for (const oracle::Exact& mid : mids) {
        float x = oracle::round_to_f32(mid);
        for (int k = 0; k < 2; ++k) x = std::nextafter(x, -kInf);
        for (int k = 0; k < 5; ++k, x = std::nextafter(x, kInf)) {
          for (std::uint32_t r : {0u, 0x80000000u, 0xFFFFFFFFu}) {
            check_checker_matches_oracle(id, p, x, r);
            check_checker_matches_oracle(id, p, -x, r);
          }
        }
      }
    }
  }
}

TEST_CASE("checker equals the oracle on 20000 random binary32 patterns per format") {
  std::mt19937 rng(20261130);
  for (FormatId id : kFormats) {
    const Policy p = cuda_satfinite();
    for (int i = 0; i < 20000; ++i) {
      // Half the samples across every pattern, half inside the format's range where rounding happens.
      std::uint32_t u = rng();
      if (i % 2) u = (u & 0x807FFFFFu) | ((100 + rng() % 50) << 23);
      check_checker_matches_oracle(id, p, float_from_bits(u), rng());
    }
  }
}

TEST_CASE("oracle rounding to binary32 equals the hardware conversion of doubles") {
  std::mt19937_64 rng(7);
  int checked = 0;
  for (int i = 0; i < 50000; ++i) {
    const double d = std::bit_cast<double>(rng());
    if (!std::isfinite(d)) continue;
    const float hw = static_cast<float>(d);  // IEEE RNE, gradual underflow, overflow to Inf
    const float exact = oracle::round_to_f32(oracle::Exact(d));
    CAPTURE(bits(d));
    CHECK(bits(hw) == bits(exact));
    ++checked;
  }
  CHECK(checked > 45000);
  // ties: half-way between 1 and 1 + 2^-23 goes to 1 (even); half-way above goes up
  CHECK(value(oracle::round_to_f32(oracle::Exact(1) + ldexp(oracle::Exact(1), -24))) == value(1.0f));
  CHECK(value(oracle::round_to_f32(oracle::Exact(1) + ldexp(oracle::Exact(3), -24))) == value(1.0f + std::ldexp(1.0f, -22)));
}

TEST_CASE("ulp distance and ulp error") {
  CHECK(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)) == 1);
  CHECK(ulp_distance(0.0f, -0.0f) == 0);
  CHECK(ulp_distance(std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min()) == 2);
  CHECK(ulp_distance(1.0f, 2.0f) == (1u << 23));
  // 1 + 2^-24 is half an ulp from 1.0f
  CHECK(oracle::ulp_error(1.0f, oracle::Exact(1) + ldexp(oracle::Exact(1), -24)) == oracle::Exact(0.5));
}

TEST_CASE("streaming interval search agrees with the binary search") {
  const DoubleChecker c(FormatId::E4M3FN, cuda_satfinite());
  std::size_t hint = 0;
  for (std::uint32_t u = 0; u < 0x7F800000u; u += 0x1001) {
    const double v = float_from_bits(u);
    hint = c.advance(hint, v);
    CAPTURE(bits(v));
    REQUIRE(hint == c.interval_of(v));
  }
}
