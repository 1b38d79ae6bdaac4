#include "lowbit/fp8.hpp"

#include <string>

namespace lowbit::fp8 {

FormatInfo format_info(FormatId id) {
  return dispatch(id, [](auto traits) {
    using F = decltype(traits);
    return FormatInfo{F::id,        F::name,      F::exponent_bits,     F::mantissa_bits, F::bias,
                      F::has_inf,   F::max_finite, F::short_name,       F::code_dtype,    F::is_signed,
                      F::has_zero,  F::has_negative_zero, F::nan_codes, F::inf,           F::max_value};
  });
}

std::optional<FormatId> parse_format(std::string_view name) {
  for (FormatId id : kFormats) {
    const FormatInfo f = format_info(id);
    if (name == f.name || name == f.short_name) return id;
  }
  return std::nullopt;
}

FormatId format_from_param(std::string_view value, std::string_view param) {
  if (const auto id = parse_format(value)) return *id;
  throw std::runtime_error(std::string(param) + " must be e4m3 (or e4m3fn) or e5m2 (got '" + std::string(value) + "')");
}

std::optional<FormatId> format_of_dtype(DType d) {
  for (FormatId id : kFormats)
    if (format_info(id).code_dtype == d) return id;
  return std::nullopt;
}

float decode(FormatId format, std::uint8_t code, NanWidening widening) {
  return dispatch(format, [code, widening](auto traits) { return decode<decltype(traits)>(code, widening); });
}

std::optional<NanWidening> parse_nan_widening(std::string_view name) {
  if (name == "quiet" || name == "avx512") return NanWidening::Quiet;
  if (name == "c10") return NanWidening::Payload;
  return std::nullopt;
}

std::optional<NanEncoding> parse_nan_encoding(std::string_view name, FormatId format) {
  if (name == "torch") return kTorchNan;
  if (name == "cuda") return kCudaNan;
  if (name == "ml_dtypes") return dispatch(format, [](auto traits) { return kMlDtypesNan<decltype(traits)>; });
  return std::nullopt;
}

std::string_view default_nan_encoding(Overflow o) { return o == Overflow::SatFinite ? "cuda" : "torch"; }

std::string_view overflow_name(Overflow o) {
  switch (o) {
    case Overflow::SatFinite: return "satfinite";
    case Overflow::NaN: return "nan";
    case Overflow::Inf: return "inf";
  }
  return "?";
}

std::optional<Overflow> parse_overflow(std::string_view name) {
  for (Overflow o : {Overflow::SatFinite, Overflow::NaN, Overflow::Inf})
    if (overflow_name(o) == name) return o;
  return std::nullopt;
}

}  // namespace lowbit::fp8
