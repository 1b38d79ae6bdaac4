#pragma once
// Operands for doctest checks on floats and codes that print their bits when a check fails:
// doctest alone prints `1.0625 == 1.0625` for two floats one ulp apart and codes as decimals.
// Each wrapper keeps the comparison it is named for, so a check reads as what it asserts:
//   bits(x) == bits(y)      bit patterns (float, double): -0 != +0, a NaN equals the same NaN
//   f32_bits(u), f64_bits(u) the float whose bit pattern is u, as the other side of bits(x)
//   value(x) == value(y)    IEEE numbers: -0 == +0, NaN != NaN; also <, >, <=, >= and doctest::Approx
//   bf16(h), f16(h)         16-bit storage codes, compared by pattern, printed with their value
//   e4m3(c), e5m2(c), fp8_code<Format>(c), fp8_code(c, id), code(c, table), code(c)   8-bit codes
//   is_nan(x), is_inf(x), is_finite(x)   predicates that print their operand
// Printed: float `0x3F880001 (1.06250012)` (9 significant digits, enough to tell any two floats
// apart), double `0x3FF0000000000001 (1.0000000000000002)` (17), bf16/f16 `0x3F80 (1)`, FP8 and
// codebook codes `0x7E (448)`, codes of no known format `0x7E`. Nothing is formatted unless a check
// fails (doctest stringifies lazily), so the wrappers cost nothing measurable in loops.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "lowbit/float_bits.hpp"
#include "lowbit/fp8.hpp"

namespace lowbit::test {

// ---- floats ----------------------------------------------------------------------------------

inline std::string describe_float(float x) { return fmt::format("0x{:08X} ({:.9g})", bits_of(x), x); }
inline std::string describe_float(double x) {
  return fmt::format("0x{:016X} ({:.17g})", std::bit_cast<std::uint64_t>(x), x);
}

// Holds the pattern, not the float, so a signalling NaN's payload survives to the printout.
template <class T>
struct Bits {
  using Pattern = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  Pattern pattern;
  friend bool operator==(Bits, Bits) = default;
};
inline Bits<float> bits(float x) { return {bits_of(x)}; }
inline Bits<double> bits(double x) { return {std::bit_cast<std::uint64_t>(x)}; }
inline Bits<float> f32_bits(std::uint32_t u) { return {u}; }
inline Bits<double> f64_bits(std::uint64_t u) { return {u}; }
template <class T>
std::string describe(Bits<T> b) {
  return describe_float(std::bit_cast<T>(b.pattern));
}

template <class T>
struct Value {
  T x;
  friend bool operator==(Value a, Value b) { return a.x == b.x; }
  friend std::partial_ordering operator<=>(Value a, Value b) { return a.x <=> b.x; }  // NaN: unordered
  friend bool operator==(Value a, const doctest::Approx& b) { return static_cast<double>(a.x) == b; }
};
inline Value<float> value(float x) { return {x}; }
inline Value<double> value(double x) { return {x}; }
template <class T>
std::string describe(Value<T> v) {
  return describe_float(v.x);
}

// ---- 16-bit storage codes ----------------------------------------------------------------------

// Codes are held wide so that an expected or computed value outside the code's range compares
// unequal and prints as it is, instead of being truncated into range by the call.
struct Half {
  std::uint32_t code;
  bool is_bf16;
  friend bool operator==(Half a, Half b) { return a.code == b.code; }
};
inline Half bf16(std::uint32_t h) { return {h, true}; }
inline Half f16(std::uint32_t h) { return {h, false}; }
inline std::string describe(Half h) {
  if (h.code > 0xFFFF) return fmt::format("0x{:X} (not a 16-bit code)", h.code);
  const auto c = static_cast<std::uint16_t>(h.code);
  return fmt::format("0x{:04X} ({:.9g})", c, h.is_bf16 ? widen_bf16(c) : widen_f16(c));
}

// ---- 8-bit codes -------------------------------------------------------------------------------

struct Code {
  std::uint32_t code;
  std::optional<fp8::FormatId> fp8;  // decoded as this FP8 format, or
  std::span<const float> table;      // looked up in this codebook, or (neither) printed as hex only
  friend bool operator==(Code a, Code b) { return a.code == b.code; }
};
inline Code code(std::uint32_t c) { return {c, std::nullopt, {}}; }
inline Code code(std::uint32_t c, std::span<const float> table) { return {c, std::nullopt, table}; }
inline Code fp8_code(std::uint32_t c, fp8::FormatId id) { return {c, id, {}}; }
template <class Format>
Code fp8_code(std::uint32_t c) {
  return fp8_code(c, Format::id);
}
inline Code e4m3(std::uint32_t c) { return fp8_code(c, fp8::FormatId::E4M3FN); }
inline Code e5m2(std::uint32_t c) { return fp8_code(c, fp8::FormatId::E5M2); }
inline std::string describe(const Code& c) {
  if (c.code > 0xFF) return fmt::format("0x{:X} (not an 8-bit code)", c.code);
  const auto u = static_cast<std::uint8_t>(c.code);
  if (c.fp8) {
    return fmt::format("0x{:02X} ({:.9g})", u, fp8::decode(*c.fp8, u));
  }
  if (u < c.table.size()) return fmt::format("0x{:02X} ({:.9g})", u, c.table[u]);
  if (!c.table.empty()) return fmt::format("0x{:02X} (outside the {}-entry table)", u, c.table.size());
  return fmt::format("0x{:02X}", u);
}

// ---- predicates --------------------------------------------------------------------------------

template <class T>
struct Predicate {
  const char* name;
  bool holds;
  T x;
  explicit operator bool() const { return holds; }
};
template <class T>
Predicate<T> is_nan(T x) {
  return {"isnan", std::isnan(x), x};
}
template <class T>
Predicate<T> is_inf(T x) {
  return {"isinf", std::isinf(x), x};
}
template <class T>
Predicate<T> is_finite(T x) {
  return {"isfinite", std::isfinite(x), x};
}
template <class T>
std::string describe(const Predicate<T>& p) {
  return fmt::format("{}({})", p.name, describe_float(p.x));
}

template <class T>
concept Described = requires(const T& t) {
  { describe(t) } -> std::same_as<std::string>;
};

}  // namespace lowbit::test

// doctest prints every wrapper above through its describe().
namespace doctest {
template <class T>
  requires lowbit::test::Described<T>
struct StringMaker<T> {
  static String convert(const T& t) { return describe(t).c_str(); }
};
}  // namespace doctest
