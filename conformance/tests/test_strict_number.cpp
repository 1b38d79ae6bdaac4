// The one parser of typed numbers (lowbit/strict_number.hpp): what it takes and what it refuses,
// with the range and the text in the error. Expected values are the texts' decimal values.
#include <doctest/doctest.h>

#include <cstdint>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "lowbit/strict_number.hpp"

using lowbit::parse_real;
using lowbit::parse_whole;

namespace {

constexpr std::uint64_t kAll = std::numeric_limits<std::uint64_t>::max();

std::string whole_error(const std::string& text, std::uint64_t lo, std::uint64_t hi) {
  try {
    parse_whole(text, "--x", lo, hi);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

std::string real_error(const std::string& text, double lo, double hi) {
  try {
    parse_real(text, "x", lo, hi);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("whole numbers: digits up to 2^64-1 exactly, whole reals, nothing else") {
  CHECK(parse_whole("0", "n", 0, kAll) == 0);
  CHECK(parse_whole("18446744073709551615", "n", 0, kAll) == kAll);
  CHECK(parse_whole("9007199254740993", "n", 0, kAll) == 9007199254740993ull);  // not a double: read as digits
  CHECK(parse_whole("1e3", "n", 0, kAll) == 1000);
  CHECK(parse_whole("4096.0", "n", 0, kAll) == 4096);
  CHECK(parse_whole("1e19", "n", 0, kAll) == 10000000000000000000ull);
  for (const char* bad : {"", "-1", "-0.5", "18446744073709551616", "1.8446744073709552e19", "1e30", "1.5", "nan", "inf",
                          "-inf", " 5", "5 ", "+5", "0x10", "5k", "1,000", "--1", "1e", "."}) {
    CAPTURE(bad);
    CHECK(whole_error(bad, 0, kAll) ==
          "--x must be a whole number in 0..18446744073709551615 (got " + std::string(*bad ? bad : "nothing") + ")");
  }
  CHECK(whole_error("0", 1, 1000) == "--x must be a whole number in 1..1000 (got 0)");
  CHECK(whole_error("1001", 1, 1000) == "--x must be a whole number in 1..1000 (got 1001)");
  CHECK(whole_error("2147483647", 1, 1000) == "--x must be a whole number in 1..1000 (got 2147483647)");
  CHECK(parse_whole("1000", "n", 1, 1000) == 1000);
}

TEST_CASE("real numbers: finite decimal text in the range, nothing else") {
  constexpr double lo = std::numeric_limits<double>::lowest(), hi = std::numeric_limits<double>::max();
  CHECK(parse_real("0.5", "x", lo, hi) == 0.5);
  CHECK(parse_real("-1e-3", "x", lo, hi) == -0.001);
  CHECK(parse_real("3", "x", lo, hi) == 3.0);
  CHECK(!std::signbit(parse_real("-0", "x", lo, hi)));
  for (const char* bad : {"", "nan", "-nan", "inf", "-inf", "1e999", " 1", "1 ", "+1", "0x1p3", "1.5.2", "e5"}) {
    CAPTURE(bad);
    CHECK(real_error(bad, lo, hi) == "x must be a finite number (got " + std::string(*bad ? bad : "nothing") + ")");
  }
  CHECK(real_error("0", 0.001, 86400) == "x must be a finite number in 0.001..86400 (got 0)");
  CHECK(real_error("86400.5", 0.001, 86400) == "x must be a finite number in 0.001..86400 (got 86400.5)");
  CHECK(parse_real("86400", "x", 0.001, 86400) == 86400.0);
}
