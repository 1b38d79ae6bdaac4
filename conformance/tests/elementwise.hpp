#pragma once
// Whole sequences compared element by element, for doctest checks: CHECK(same_bits(got, expected)).
// A failing check prints the sizes, how many elements differ and the first difference with both
// elements' bits (bits_printer.hpp), where `vector == vector` would print `{?} == {?}`. Each keeps
// its comparison: same_bits (bit patterns), same_values (IEEE ==, as std::vector's operator==),
// same_codes (8-bit codes), same_bytes (a tensor's bytes, printed by the first tensor's dtype).
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bits_printer.hpp"
#include "lowbit/case.hpp"

namespace lowbit::test {

template <class Element>
struct Agreement {
  const char* compared = "";  // what "differ" means: "bit patterns", "values", ...
  std::size_t size_a = 0, size_b = 0, differing = 0, first = 0;
  std::optional<Element> a, b;  // the first differing pair
  explicit operator bool() const { return size_a == size_b && differing == 0; }
};

// Elements 0..min(sizes) compared through wrap(a[i]) == wrap(b[i]).
template <class A, class B, class Wrap>
auto agreement(const char* compared, const A& a, const B& b, Wrap wrap) {
  Agreement<decltype(wrap(a[0]))> r;
  r.compared = compared, r.size_a = a.size(), r.size_b = b.size();
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (wrap(a[i]) == wrap(b[i])) continue;
    if (r.differing++ == 0) r.first = i, r.a = wrap(a[i]), r.b = wrap(b[i]);
  }
  return r;
}

template <class Element>
std::string describe(const Agreement<Element>& r) {
  std::string s = r.size_a == r.size_b ? fmt::format("{} elements", r.size_a)
                                       : fmt::format("sizes differ: {} vs {} elements", r.size_a, r.size_b);
  if (r.differing == 0) return s + fmt::format(", none differ in {}", r.compared);
  return s + fmt::format(", {} {} in {}, the first at [{}]: {} vs {}", r.differing, r.differing == 1 ? "differs" : "differ",
                         r.compared, r.first, describe(*r.a), describe(*r.b));
}

inline auto same_bits(std::span<const float> a, std::span<const float> b) {
  return agreement("bit patterns", a, b, [](float x) { return bits(x); });
}
inline auto same_values(std::span<const float> a, std::span<const float> b) {
  return agreement("values", a, b, [](float x) { return value(x); });
}
inline auto same_codes(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  return agreement("codes", a, b, [](std::uint8_t c) { return code(c); });
}
inline auto same_codes(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b, fp8::FormatId id) {
  return agreement("codes", a, b, [id](std::uint8_t c) { return fp8_code(c, id); });
}
inline auto same_codes(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b,
                       std::span<const float> table) {
  return agreement("codes", a, b, [table](std::uint8_t c) { return code(c, table); });
}

// One element of a tensor, printed by its dtype.
struct TensorElement {
  DType dtype;
  std::uint64_t pattern;
};
inline std::string describe(TensorElement e) {
  switch (e.dtype) {
    case DType::F32: return describe(f32_bits(static_cast<std::uint32_t>(e.pattern)));
    case DType::BF16: return describe(bf16(static_cast<std::uint16_t>(e.pattern)));
    case DType::F16: return describe(f16(static_cast<std::uint16_t>(e.pattern)));
    case DType::F8_E4M3: return describe(e4m3(static_cast<std::uint8_t>(e.pattern)));
    case DType::F8_E5M2: return describe(e5m2(static_cast<std::uint8_t>(e.pattern)));
    case DType::U8: return describe(code(static_cast<std::uint8_t>(e.pattern)));
    case DType::I32: return fmt::format("{}", static_cast<std::int32_t>(e.pattern));
    case DType::I64: return fmt::format("{}", static_cast<std::int64_t>(e.pattern));
  }
  return fmt::format("0x{:X}", e.pattern);
}

// The tensors' bytes, equal exactly when `a.bytes == b.bytes`; elements are cut and printed by a's dtype.
inline Agreement<TensorElement> same_bytes(const Tensor& a, const Tensor& b) {
  const std::size_t width = dtype_size(a.dtype);
  const auto element = [&](const std::vector<std::uint8_t>& bytes, std::size_t i) {
    return std::span(bytes).subspan(i * width, std::min(width, bytes.size() - i * width));  // the last may be partial
  };
  const auto pattern = [&](std::span<const std::uint8_t> e) {
    std::uint64_t p = 0;
    std::memcpy(&p, e.data(), e.size());  // little-endian host, as the case files
    return TensorElement{a.dtype, p};
  };
  const auto count = [&](const std::vector<std::uint8_t>& bytes) { return (bytes.size() + width - 1) / width; };
  Agreement<TensorElement> r;
  r.compared = "bytes", r.size_a = count(a.bytes), r.size_b = count(b.bytes);
  for (std::size_t i = 0; i < std::min(r.size_a, r.size_b); ++i) {
    const auto x = element(a.bytes, i), y = element(b.bytes, i);
    if (std::ranges::equal(x, y)) continue;
    if (r.differing++ == 0) r.first = i, r.a = pattern(x), r.b = pattern(y);
  }
  return r;
}

}  // namespace lowbit::test
