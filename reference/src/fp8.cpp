#include "lowbit/fp8.hpp"

namespace lowbit::fp8 {

FormatInfo format_info(FormatId id) {
  if (id == FormatId::E4M3FN)
    return {id, E4M3FN::name, E4M3FN::exponent_bits, E4M3FN::mantissa_bits, E4M3FN::bias, E4M3FN::has_inf,
            E4M3FN::max_finite};
  return {id, E5M2::name, E5M2::exponent_bits, E5M2::mantissa_bits, E5M2::bias, E5M2::has_inf, E5M2::max_finite};
}

std::optional<FormatId> parse_format(std::string_view name) {
  if (name == E4M3FN::name) return FormatId::E4M3FN;
  if (name == E5M2::name) return FormatId::E5M2;
  return std::nullopt;
}

std::optional<NanEncoding> parse_nan_encoding(std::string_view name, FormatId format) {
  if (name == "torch") return kTorchNan;
  if (name == "cuda") return kCudaNan;
  if (name == "ml_dtypes") return format == FormatId::E4M3FN ? kMlDtypesNan<E4M3FN> : kMlDtypesNan<E5M2>;
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
