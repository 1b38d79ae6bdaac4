#pragma once
// FP8 (OCP OFP8 E4M3FN and E5M2) encode and decode. One routine serves every format through traits
// and every implementation through an explicit Policy, in the manner of ml_dtypes' float8.h and
// CUTLASS's numeric_conversion.h. The arithmetic is on bit patterns only: no FP operation, so the
// result cannot depend on the compiler, FTZ/DAZ or contraction. docs/formats/fp8.md states the rules.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "lowbit/dtype.hpp"
#include "lowbit/float_bits.hpp"

namespace lowbit::fp8 {

// ---- Formats ---------------------------------------------------------------------------------
// A format is declared once, as a Spec of the fields below (docs/formats/fp8.md, "Adding a
// format"), and used as Traits<Spec>, which derives what the generic code asks for: the codes of
// the largest finite value, of Inf and of the canonical NaN, the NaN and Inf tests, and the largest
// finite value as a float. The fields follow ml_dtypes' float8.h (Traits: kIsSigned, kHasZero,
// kExponentBits, kMantissaBits, kExponentBias; numeric_limits: has_infinity, quiet_NaN) and can
// describe its other flavours too: the FNUZ variants and the unsigned ones (MX's scale E8M0).
// Codes of a signed format are sign-magnitude: bit 7 is the sign, bits 6..0 the magnitude code,
// and magnitude codes 0..max_finite are ordered by value. That ordering is what makes one rounding
// routine serve all.

enum class FormatId { E4M3FN, E5M2 };

// Which codes are NaN.
enum class NanCodes {
  Ieee,          // exponent field all ones with a nonzero mantissa, either sign (E5M2)
  AllOnes,       // the all-ones magnitude only, either sign: S.1111.111 (E4M3FN), 0xFF (E8M0)
  NegativeZero,  // 0x80 only, the code -0 would have: the FNUZ formats, which have no -0
};

template <class Spec>
struct Traits : Spec {
  static constexpr int exponent_bits = Spec::exponent_bits, mantissa_bits = Spec::mantissa_bits;
  static_assert(int{Spec::is_signed} + exponent_bits + mantissa_bits == 8, "an FP8 format has 8 bits");
  static constexpr std::uint8_t sign_mask = Spec::is_signed ? 0x80 : 0x00;
  static constexpr std::uint8_t magnitude_mask = Spec::is_signed ? 0x7F : 0xFF;
  // -0 exists where there is a sign bit, a zero, and 0x80 is not taken by NaN.
  static constexpr bool has_negative_zero =
      Spec::is_signed && Spec::has_zero && Spec::nan_codes != NanCodes::NegativeZero;
  // The magnitude with every exponent bit set and a zero mantissa: Inf where the format has one.
  static constexpr std::uint8_t all_ones_exponent =
      static_cast<std::uint8_t>(((1u << exponent_bits) - 1) << mantissa_bits);
  static constexpr std::uint8_t inf = Spec::has_inf ? all_ones_exponent : 0;  // magnitude code; 0: none
  // The largest finite magnitude code: below the all-ones exponent (IEEE), below the all-ones
  // magnitude (E4M3FN, E8M0), or the all-ones magnitude itself (FNUZ: NaN lives at 0x80).
  static constexpr std::uint8_t max_finite =
      Spec::nan_codes == NanCodes::Ieee      ? all_ones_exponent - 1
      : Spec::nan_codes == NanCodes::AllOnes ? magnitude_mask - 1
                                             : magnitude_mask;
  // The NaN ml_dtypes produces (numeric_limits::quiet_NaN): IEEE's first mantissa bit set, else
  // the format's only NaN (a full code for FNUZ, a magnitude otherwise).
  static constexpr std::uint8_t quiet_nan =
      Spec::nan_codes == NanCodes::Ieee      ? all_ones_exponent | (1u << (mantissa_bits > 0 ? mantissa_bits - 1 : 0))
      : Spec::nan_codes == NanCodes::AllOnes ? magnitude_mask
                                             : 0x80;
  static_assert(Spec::nan_codes != NanCodes::Ieee || mantissa_bits > 0, "IEEE NaNs need a mantissa");
  static_assert(!Spec::has_inf || Spec::nan_codes == NanCodes::Ieee, "Inf is the all-ones exponent of IEEE-like formats");

  static constexpr bool is_nan(std::uint8_t c) {
    if constexpr (Spec::nan_codes == NanCodes::Ieee) return (c & magnitude_mask) > all_ones_exponent;
    else if constexpr (Spec::nan_codes == NanCodes::AllOnes) return (c & magnitude_mask) == magnitude_mask;
    else return c == 0x80;
  }
  static constexpr bool is_inf(std::uint8_t c) { return Spec::has_inf && (c & magnitude_mask) == inf; }

  // The largest finite value (448 for E4M3FN, 57344 for E5M2): a normal, so its binary32 pattern
  // is the code's fields re-biased.
  static constexpr float max_value = [] {
    constexpr int biased = (max_finite >> mantissa_bits) + 127 - Spec::bias;
    static_assert(biased >= 1 && biased <= 254, "the largest finite value is a normal binary32");
    return float_from_bits(static_cast<std::uint32_t>(biased) << 23 |
                           std::uint32_t{max_finite & ((1u << mantissa_bits) - 1)} << (23 - mantissa_bits));
  }();
};

struct E4M3FNSpec {  // OCP OFP8 E4M3 ("FN": finite, no Inf; NaN only at S.1111.111)
  static constexpr FormatId id = FormatId::E4M3FN;
  static constexpr std::string_view name = "e4m3fn";    // torch and ml_dtypes float8_e4m3fn
  static constexpr std::string_view short_name = "e4m3";  // COAT's and Triton's spelling (params "fp8")
  static constexpr DType code_dtype = DType::F8_E4M3;     // safetensors "F8_E4M3"
  static constexpr bool is_signed = true;
  static constexpr int exponent_bits = 4;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 7;
  static constexpr bool has_zero = true;
  static constexpr bool has_inf = false;
  static constexpr NanCodes nan_codes = NanCodes::AllOnes;
};
using E4M3FN = Traits<E4M3FNSpec>;

struct E5M2Spec {  // OCP OFP8 E5M2 (IEEE-like: Inf at S.11111.00, NaN at S.11111.{01,10,11})
  static constexpr FormatId id = FormatId::E5M2;
  static constexpr std::string_view name = "e5m2";
  static constexpr std::string_view short_name = "e5m2";
  static constexpr DType code_dtype = DType::F8_E5M2;  // safetensors "F8_E5M2"
  static constexpr bool is_signed = true;
  static constexpr int exponent_bits = 5;
  static constexpr int mantissa_bits = 2;
  static constexpr int bias = 15;
  static constexpr bool has_zero = true;
  static constexpr bool has_inf = true;
  static constexpr NanCodes nan_codes = NanCodes::Ieee;
};
using E5M2 = Traits<E5M2Spec>;

// Every FormatId, for loops over the formats.
inline constexpr FormatId kFormats[] = {FormatId::E4M3FN, FormatId::E5M2};

// The one place a run-time FormatId becomes a type: calls fn(Traits{}) with the format's traits
// (an empty object; use decltype). Every branch must return the same type.
template <class Fn>
constexpr decltype(auto) dispatch(FormatId id, Fn&& fn) {
  switch (id) {
    case FormatId::E4M3FN: return std::forward<Fn>(fn)(E4M3FN{});
    case FormatId::E5M2: return std::forward<Fn>(fn)(E5M2{});
  }
  throw std::invalid_argument("fp8::dispatch: not a FormatId");
}

// The format described by numbers instead of types, for code chosen at run time.
struct FormatInfo {
  FormatId id;
  std::string_view name;
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_inf;
  std::uint8_t max_finite;  // magnitude code
  std::string_view short_name;
  DType code_dtype;
  bool is_signed;
  bool has_zero;
  bool has_negative_zero;
  NanCodes nan_codes;
  std::uint8_t inf;  // magnitude code, 0 when the format has none
  float max_value;
};
FormatInfo format_info(FormatId id);
// "e4m3fn" or its short spelling "e4m3" (COAT's params), "e5m2".
std::optional<FormatId> parse_format(std::string_view name);
// The same for a parameter's value: throws std::runtime_error naming the parameter otherwise.
FormatId format_from_param(std::string_view value, std::string_view param);
// The format whose codes a tensor of this dtype holds (F8_E4M3, F8_E5M2), if any.
std::optional<FormatId> format_of_dtype(DType d);

// ---- Policies --------------------------------------------------------------------------------

// What a finite value whose rounded magnitude exceeds the largest finite code becomes.
enum class Overflow {
  SatFinite,  // +-max finite, and +-Inf inputs too (CUDA __NV_SATFINITE, cvt.rn.satfinite, Triton)
  NaN,        // NaN (PyTorch e4m3fn up to torch 2.12; OCP non-saturating E4M3)
  Inf,        // +-Inf where the format has one, else NaN (OCP non-saturating; torch and ml_dtypes E5M2)
};

// How a NaN input is encoded: implementations differ in the magnitude and in keeping the sign.
// A NaN the overflow policy makes (a finite value past the largest, or +-Inf in a format without
// Inf) has the same magnitude but always the input's sign: c10, ml_dtypes and cuda_fp8.hpp's
// __NV_NOSAT all keep it (CUDA 13.0 E4M3 NOSAT: -500 and -Inf give 0xFF while -NaN gives 0x7F;
// conformance/tests/test_cuda_fp8_host*.cpp compare every input).
struct NanEncoding {
  std::uint8_t magnitude = 0x7F;
  bool keeps_sign = true;
  bool operator==(const NanEncoding&) const = default;
};
inline constexpr NanEncoding kTorchNan{0x7F, true};  // c10: 0x7F | sign, both formats
inline constexpr NanEncoding kCudaNan{0x7F, false};  // cuda_fp8.hpp canonicalizes a NaN input: sign dropped
template <class Format>
inline constexpr NanEncoding kMlDtypesNan{Format::quiet_nan, true};  // 0x7F|s e4m3fn, 0x7E|s e5m2

struct Policy {
  Overflow overflow = Overflow::NaN;
  NanEncoding nan = kTorchNan;
  bool operator==(const Policy&) const = default;
};

// The implementations this suite knows, by name (docs/formats/fp8.md has the table).
template <class Format>
constexpr Policy torch_eager_legacy() {  // torch <= 2.12 (read in the 2.12.0 wheel's Float8_*.h)
  return {Format::has_inf ? Overflow::Inf : Overflow::NaN, kTorchNan};
}
template <class Format>
constexpr Policy torch_eager() {  // torch >= 2.13 (PR #178817; read in the 2.13.0 and 2.15.0 wheels)
  return {Format::has_inf ? Overflow::Inf : Overflow::SatFinite, kTorchNan};
}
constexpr Policy cuda_satfinite() { return {Overflow::SatFinite, kCudaNan}; }  // also Triton
template <class Format>
constexpr Policy cuda_nosat() { return {Format::has_inf ? Overflow::Inf : Overflow::NaN, kCudaNan}; }
template <class Format>
constexpr Policy ml_dtypes() { return {Format::has_inf ? Overflow::Inf : Overflow::NaN, kMlDtypesNan<Format>}; }

// NaN encodings by implementation name: "torch", "cuda", "ml_dtypes" (the last depends on the format).
std::optional<NanEncoding> parse_nan_encoding(std::string_view name, FormatId format);
// The NaN encoding that usually goes with an overflow policy: CUDA's with satfinite, torch's otherwise.
std::string_view default_nan_encoding(Overflow o);

std::string_view overflow_name(Overflow o);
std::optional<Overflow> parse_overflow(std::string_view name);  // "satfinite" | "nan" | "inf"

// ---- Encoding --------------------------------------------------------------------------------

namespace detail {

// Result of cutting |x| to the target grid: the truncated magnitude code (unbounded above, so it
// may exceed max_finite) and the discarded low bits as a fraction rem / 2^shift of one target ulp.
struct Truncated {
  std::uint32_t code;
  std::uint64_t rem;
  int shift;  // number of discarded bits; rem < 2^shift (shift may exceed 63: then rem is tiny)
};

template <class Format>
constexpr Truncated truncate_magnitude(std::uint32_t abs_bits) {
  constexpr int m = Format::mantissa_bits;
  constexpr std::uint32_t min_normal_biased = 127 + 1 - Format::bias;  // binary32 exponent field
  const std::uint32_t exponent = abs_bits >> 23;
  if (exponent >= min_normal_biased) {
    // Normal in the target: re-bias the exponent field in place; magnitude codes then follow the
    // binary32 bit pattern shifted right, and a carry out of the mantissa bumps the exponent.
    constexpr int shift = 23 - m;
    const std::uint32_t rebased = abs_bits - ((127u - Format::bias) << 23);
    return {rebased >> shift, rebased & ((1u << shift) - 1), shift};
  }
  // Subnormal in the target: value = significand * 2^(e - 150), target ulp = 2^(1 - bias - m).
  const std::uint64_t significand = exponent ? ((abs_bits & 0x7FFFFFu) | 0x800000u) : abs_bits;
  const std::uint32_t e = exponent ? exponent : 1;
  const int shift = static_cast<int>(151 - Format::bias - m) - static_cast<int>(e);
  if (shift >= 64) return {0, significand, shift};
  return {static_cast<std::uint32_t>(significand >> shift),
          significand & ((std::uint64_t{1} << shift) - 1), shift};
}

// Round to nearest, ties to the even code.
constexpr bool rounds_up_nearest_even(const Truncated& t) {
  if (t.shift >= 64) return false;  // below a quarter ulp
  const std::uint64_t half = std::uint64_t{1} << (t.shift - 1);
  return t.rem > half || (t.rem == half && (t.code & 1u));
}

// Stochastic rounding: F = the discarded fraction's top 32 bits (floor(fraction * 2^32)); round up
// iff F + random_bits carries out of 32 bits. P(up) = F / 2^32, equal to the fraction whenever at
// most 32 bits are discarded; values on the grid (F = 0) never move.
constexpr bool rounds_up_stochastic(const Truncated& t, std::uint32_t random_bits) {
  std::uint64_t top32;
  if (t.shift <= 32) top32 = t.rem << (32 - t.shift);
  else if (t.shift - 32 >= 64) top32 = 0;
  else top32 = t.rem >> (t.shift - 32);
  return top32 + random_bits >= (std::uint64_t{1} << 32);
}

// The code of a NaN input.
template <class Format>
constexpr std::uint8_t nan_code(std::uint8_t sign, const Policy& p) {
  return static_cast<std::uint8_t>(p.nan.magnitude | (p.nan.keeps_sign ? sign : 0));
}

// The code of a NaN made by overflow: the input's sign always (see NanEncoding).
template <class Format>
constexpr std::uint8_t overflow_nan_code(std::uint8_t sign, const Policy& p) {
  return static_cast<std::uint8_t>(p.nan.magnitude | sign);
}

template <class Format>
constexpr std::uint8_t overflow_code(std::uint8_t sign, const Policy& p) {
  switch (p.overflow) {
    case Overflow::SatFinite: return sign | Format::max_finite;
    case Overflow::Inf:
      if constexpr (Format::has_inf) return sign | Format::inf;
      [[fallthrough]];
    case Overflow::NaN: break;
  }
  return overflow_nan_code<Format>(sign, p);
}

template <class Format, class RoundsUp>
constexpr std::uint8_t encode_with(float x, const Policy& p, RoundsUp rounds_up) {
  static_assert(Format::has_negative_zero && Format::nan_codes != NanCodes::NegativeZero,
                "the encoder knows sign-magnitude formats with +-0 (OCP OFP8); an unsigned, zero-less or FNUZ "
                "format needs its own rules for negative inputs, zero and NaN here first");
  const std::uint32_t u = bits_of(x);
  const auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return nan_code<Format>(sign, p);
  if (a == 0x7F800000u) {  // Inf is not an overflow: SatFinite clamps it, the others keep Inf
    if (p.overflow == Overflow::SatFinite) return sign | Format::max_finite;
    if constexpr (Format::has_inf) return sign | Format::inf;
    return overflow_nan_code<Format>(sign, p);  // a format without Inf has only NaN left
  }
  const Truncated t = truncate_magnitude<Format>(a);
  const std::uint32_t magnitude = t.code + (rounds_up(t) ? 1u : 0u);
  if (magnitude > Format::max_finite) return overflow_code<Format>(sign, p);
  return static_cast<std::uint8_t>(sign | magnitude);
}

}  // namespace detail

// Reference: OCP OFP8 rev 1.0 RNE; bit-identical to c10 Float8_e4m3fn.h/Float8_e5m2.h (torch 2.x),
// cuda_fp8.hpp __nv_cvt_float_to_fp8 and ml_dtypes float8.h under the matching Policy.
template <class Format>
constexpr std::uint8_t encode_nearest_even(float x, const Policy& p) {
  return detail::encode_with<Format>(x, p, detail::rounds_up_nearest_even);
}

// Reference: lowbit's stochastic rounding rule (docs/formats/fp8.md), random bits supplied by the caller.
template <class Format>
constexpr std::uint8_t encode_stochastic(float x, std::uint32_t random_bits, const Policy& p) {
  return detail::encode_with<Format>(
      x, p, [random_bits](const detail::Truncated& t) { return detail::rounds_up_stochastic(t, random_bits); });
}

// ---- Decoding --------------------------------------------------------------------------------

namespace detail {

// The value of a finite magnitude code from the format's fields alone (so Traits can use it too).
template <class Spec>
constexpr float magnitude_value(std::uint32_t magnitude) {
  constexpr int m = Spec::mantissa_bits;
  const std::uint32_t exponent = magnitude >> m;
  std::uint32_t mantissa = magnitude & ((1u << m) - 1);
  if (exponent == 0 && Spec::has_zero) {  // zero and the subnormals (E8M0 has neither: its field 0 is 2^-127)
    if (mantissa == 0) return 0.0f;
    // Subnormal: mantissa * 2^(1 - bias - m); renormalize so the leading one becomes the hidden bit.
    const int leading = 31 - std::countl_zero(mantissa);  // position of the leading one, 0..m-1
    mantissa = (mantissa << (m - leading)) & ((1u << m) - 1);
    const auto biased = static_cast<std::uint32_t>(127 + 1 - Spec::bias - m + leading);
    return float_from_bits((biased << 23) | (mantissa << (23 - m)));
  }
  const int biased = static_cast<int>(exponent) + 127 - Spec::bias;
  if (biased >= 1) return float_from_bits((static_cast<std::uint32_t>(biased) << 23) | (mantissa << (23 - m)));
  // Below binary32's normal range (E8M0's 2^-127): a binary32 subnormal; the shift drops only zeros.
  return float_from_bits((((1u << m) | mantissa) << (23 - m)) >> (1 - biased));
}

}  // namespace detail

// How an implementation widens a NaN code to binary32. Every NaN code is NaN either way, but the
// bits differ, and bits are what a comparison compares (docs/tolerance-policy.md), so the rule is a
// parameter of each format whose outputs hold widened codes.
enum class NanWidening {
  Quiet,    // 0x7FC00000 | sign, whatever the code's mantissa: ml_dtypes float8.h ConvertImpl
  Payload,  // the code's mantissa moved to the top of the binary32 mantissa, quiet bit set, sign kept:
            // torch's c10 fp8e4m3fn_to_fp32_value (0x7F -> 0x7FF00000) and fp8e5m2_to_fp32_value
            // (through fp16_ieee_to_fp32_value: 0x7D, 0x7F -> 0x7FE00000, 0x7E -> 0x7FC00000)
};

// Reference: OCP OFP8 rev 1.0 decoding (ml_dtypes float8.h for the other flavours); exact. A NaN
// code widens by `widening` (default: the quiet NaN 0x7FC00000 with the code's sign).
template <class Format>
constexpr float decode(std::uint8_t code, NanWidening widening = NanWidening::Quiet) {
  const std::uint32_t sign = std::uint32_t{static_cast<std::uint8_t>(code & Format::sign_mask)} << 24;
  if (Format::is_nan(code)) {
    constexpr int m = Format::mantissa_bits;
    const std::uint32_t payload =
        widening == NanWidening::Payload ? (std::uint32_t{code} & ((1u << m) - 1)) << (23 - m) : 0u;
    return float_from_bits(sign | 0x7FC00000u | payload);
  }
  if (Format::is_inf(code)) return float_from_bits(sign | 0x7F800000u);
  return float_from_bits(sign | bits_of(detail::magnitude_value<Format>(code & Format::magnitude_mask)));
}

// The same for a format chosen at run time.
float decode(FormatId format, std::uint8_t code, NanWidening widening = NanWidening::Quiet);

// NaN widenings by name: "quiet", "c10" (Payload; torch's CPU decoding, capability AVX2 and
// default as observed), and "avx512" (Quiet: the rule documented for torch's AVX-512 path).
std::optional<NanWidening> parse_nan_widening(std::string_view name);

// Position of a code of a sign-magnitude format (E4M3FN, E5M2) on its number line: consecutive
// values are consecutive integers and +0 / -0 meet at 0. Code distances in reports are differences
// of ordinals.
constexpr int code_ordinal(std::uint8_t code) { return (code & 0x80) ? -int(code & 0x7F) : int(code & 0x7F); }

// Convenience: the same encoders from the 16-bit storage formats (widening is exact).
template <class Format>
constexpr std::uint8_t encode_nearest_even_bf16(std::uint16_t h, const Policy& p) {
  return encode_nearest_even<Format>(widen_bf16(h), p);
}
template <class Format>
constexpr std::uint8_t encode_nearest_even_f16(std::uint16_t h, const Policy& p) {
  return encode_nearest_even<Format>(widen_f16(h), p);
}

}  // namespace lowbit::fp8
