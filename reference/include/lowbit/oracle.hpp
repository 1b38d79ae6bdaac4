#pragma once
// The exact path: Boost.Multiprecision binary floats wide enough that every quantity used here
// (binary32 and FP8 values, midpoints between neighbours, differences and ratios of those) is held
// without rounding. It validates the fast paths and is reused by the later formats.
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <cstdint>

#include "lowbit/fp8.hpp"

namespace lowbit::oracle {

// 256 significant bits and a wide exponent range: far more than any exact quantity here needs.
using Exact = boost::multiprecision::number<
    boost::multiprecision::cpp_bin_float<256, boost::multiprecision::digit_base_2, void, std::int32_t, -16000, 16000>,
    boost::multiprecision::et_off>;

// Exact value of a finite binary32 (throws std::domain_error for NaN or Inf).
Exact exact_value(float x);

// Exact value of a finite FP8 code, built from its sign, exponent and mantissa fields by the OCP
// formula (throws std::domain_error for NaN and Inf codes).
Exact exact_fp8_value(std::uint8_t code, const fp8::FormatInfo& format);

// True when `code` is a NaN (resp. Inf) encoding of the format, by the OCP field rules.
bool fp8_is_nan(std::uint8_t code, const fp8::FormatInfo& format);
bool fp8_is_inf(std::uint8_t code, const fp8::FormatInfo& format);

// Exact rounding of a non-negative exact magnitude to a magnitude code by comparison with exact
// midpoints; a result above format.max_finite means overflow.
unsigned round_magnitude_nearest_even(const Exact& magnitude, const fp8::FormatInfo& format);
unsigned round_magnitude_stochastic(const Exact& magnitude, std::uint32_t random_bits, const fp8::FormatInfo& format);

// Whole conversion of a binary32 under a policy (NaN, Inf, sign and overflow by the policy's rules).
std::uint8_t to_fp8_nearest_even(float x, const fp8::FormatInfo& format, const fp8::Policy& policy);
std::uint8_t to_fp8_stochastic(float x, std::uint32_t random_bits, const fp8::FormatInfo& format,
                               const fp8::Policy& policy);

// The magnitudes where rounding to nearest changes code: the exact midpoints between neighbouring
// finite values, and the overflow threshold (largest finite + half an ulp) last.
std::vector<Exact> fp8_midpoints(const fp8::FormatInfo& format);

// Binary32 rounded to nearest, ties to even, with gradual underflow and overflow to Inf.
float round_to_f32(const Exact& x);

// Distance in binary32 ulps between two finite floats: the number of representable values
// stepped over going from a to b (+0 and -0 count as one point).
std::uint64_t ulp_distance(float a, float b);

// |got - exact| in units of the binary32 ulp at `exact` (the spacing of the binade holding it).
Exact ulp_error(float got, const Exact& exact);

}  // namespace lowbit::oracle
