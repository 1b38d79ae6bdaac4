// What a failing check prints (bits_printer.hpp, elementwise.hpp), and that each wrapper compares
// what its name says. Expected strings are derived by hand from the IEEE encodings: 1.0625 + 2^-23
// = 1.06250011920928955078125, 2^-149 = 1.40129846432...e-45, 2^-24 = 5.9604644775390625e-08,
// 1 + 2^-52 = 1.000000000000000222..., and the OCP values of the FP8 codes.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "bits_printer.hpp"
#include "elementwise.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

template <class T>
std::string printed(const T& operand) {
  return doctest::toString(operand).c_str();  // what doctest writes for a failing check's operand
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace

TEST_CASE("floats print as their bit pattern and nine significant digits, doubles seventeen") {
  CHECK(printed(bits(std::nextafter(1.0625f, 2.0f))) == "0x3F880001 (1.06250012)");
  CHECK(printed(bits(1.0625f)) == "0x3F880000 (1.0625)");
  CHECK(printed(bits(-0.0f)) == "0x80000000 (-0)");
  CHECK(printed(f32_bits(0x7FC00001u)) == "0x7FC00001 (nan)");  // quiet NaN with payload 1
  CHECK(printed(f32_bits(0xFF800001u)) == "0xFF800001 (-nan)");  // signalling, negative: the payload survives
  CHECK(printed(bits(std::numeric_limits<float>::denorm_min())) == "0x00000001 (1.40129846e-45)");
  CHECK(printed(bits(-std::numeric_limits<float>::infinity())) == "0xFF800000 (-inf)");
  CHECK(printed(bits(std::nextafter(1.0, 2.0))) == "0x3FF0000000000001 (1.0000000000000002)");
  CHECK(printed(bits(0.1)) == "0x3FB999999999999A (0.10000000000000001)");
  CHECK(printed(value(std::nextafter(1.0625f, 2.0f))) == "0x3F880001 (1.06250012)");
  CHECK(printed(is_nan(1.0f)) == "isnan(0x3F800000 (1))");
}

TEST_CASE("codes print in hex with their value where the format is known") {
  CHECK(printed(bf16(0x3F80)) == "0x3F80 (1)");
  CHECK(printed(bf16(0xFF81)) == "0xFF81 (-nan)");
  CHECK(printed(f16(0x0001)) == "0x0001 (5.96046448e-08)");
  CHECK(printed(e4m3(0x7E)) == "0x7E (448)");
  CHECK(printed(e4m3(0x80)) == "0x80 (-0)");
  CHECK(printed(e4m3(0x7F)) == "0x7F (nan)");
  CHECK(printed(e5m2(0x7B)) == "0x7B (57344)");
  CHECK(printed(e5m2(0xFC)) == "0xFC (-inf)");
  const std::vector<float> table = {-1.0f, 0.0f, 0.5f};
  CHECK(printed(code(2, table)) == "0x02 (0.5)");
  CHECK(printed(code(5, table)) == "0x05 (outside the 3-entry table)");
  CHECK(printed(code(0x7F)) == "0x7F");
  // a value that is no code is not cut into range: it prints whole and equals no code
  CHECK(printed(e4m3(0x17E)) == "0x17E (not an 8-bit code)");
  CHECK_FALSE(e4m3(0x17E) == e4m3(0x7E));
  CHECK(printed(bf16(0x13F80)) == "0x13F80 (not a 16-bit code)");
}

TEST_CASE("each wrapper keeps its comparison: bits tell -0 from +0 and match a NaN, values do not") {
  CHECK_FALSE(bits(-0.0f) == bits(0.0f));
  CHECK(value(-0.0f) == value(0.0f));
  CHECK(bits(kNaN) == bits(kNaN));
  CHECK_FALSE(value(kNaN) == value(kNaN));
  CHECK(value(kNaN) != value(kNaN));
  CHECK_FALSE(value(kNaN) < value(1.0f));
  CHECK_FALSE(value(kNaN) >= value(1.0f));
  CHECK(value(1.0f) < value(std::nextafter(1.0f, 2.0f)));
  CHECK(value(1.0f + 1e-7f) == doctest::Approx(1.0));
  CHECK(bits(1.0f) == f32_bits(0x3F800000u));
  CHECK(e4m3(0x38) == e5m2(0x38));  // codes compare as codes; the format only prints
  CHECK(is_nan(kNaN));
  CHECK_FALSE(is_finite(std::numeric_limits<float>::infinity()));
}

TEST_CASE("sequences print the first difference with its bits") {
  const std::vector<float> a = {1.0f, std::nextafter(1.0625f, 2.0f), -0.0f}, b = {1.0f, 1.0625f, 0.0f};
  CHECK(printed(same_bits(a, b)) ==
        "3 elements, 2 differ in bit patterns, the first at [1]: 0x3F880001 (1.06250012) vs 0x3F880000 (1.0625)");
  CHECK(printed(same_values(a, b)) ==
        "3 elements, 1 differs in values, the first at [1]: 0x3F880001 (1.06250012) vs 0x3F880000 (1.0625)");
  CHECK(printed(same_bits(a, a)) == "3 elements, none differ in bit patterns");
  CHECK_FALSE(same_bits(a, std::vector<float>(a.begin(), a.begin() + 2)));
  CHECK(printed(same_bits(a, std::vector<float>(a.begin(), a.begin() + 2))) ==
        "sizes differ: 3 vs 2 elements, none differ in bit patterns");
  // -0 equals +0 as values; NaN never equals itself, as with std::vector's operator==
  CHECK(same_values(std::vector<float>{-0.0f}, std::vector<float>{0.0f}));
  CHECK_FALSE(same_values(std::vector<float>{kNaN}, std::vector<float>{kNaN}));
  CHECK(same_bits(std::vector<float>{kNaN}, std::vector<float>{kNaN}));
  const std::vector<std::uint8_t> c = {0x38, 0x7E}, d = {0x38, 0x7F};
  CHECK(printed(same_codes(c, d, fp8::FormatId::E4M3FN)) ==
        "2 elements, 1 differs in codes, the first at [1]: 0x7E (448) vs 0x7F (nan)");
  const Tensor t = Tensor::from_bytes("t", DType::BF16, {2}, std::vector<std::uint8_t>{0x80, 0x3F, 0x80, 0x3F});
  const Tensor u = Tensor::from_bytes("u", DType::BF16, {2}, std::vector<std::uint8_t>{0x80, 0x3F, 0x81, 0x3F});
  CHECK(printed(same_bytes(t, u)) == "2 elements, 1 differs in bytes, the first at [1]: 0x3F80 (1) vs 0x3F81 (1.0078125)");
  CHECK(same_bytes(t, t));
}
