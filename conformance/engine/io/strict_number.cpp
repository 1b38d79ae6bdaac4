#include "lowbit/strict_number.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>


namespace lowbit {

namespace {

std::string shown(std::string_view text) { return text.empty() ? std::string("nothing") : std::string(text); }

// range "" for a real of any finite value
[[noreturn]] void refuse(std::string_view what, std::string_view kind, const std::string& range, std::string_view text) {
  throw std::invalid_argument(
      fmt::format("{} must be a {} number{}{} (got {})", what, kind, range.empty() ? "" : " in ", range, shown(text)));
}

// The text as a finite double, or nothing: from_chars reads the whole text or it is refused
// (it takes no leading '+' or space; chars_format::general takes no hex; inf and nan are refused
// here).
bool read_double(std::string_view text, double& v) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v, std::chars_format::general);
  return ec == std::errc() && ptr == end && std::isfinite(v);
}

}  // namespace

double parse_real(std::string_view text, std::string_view what, double lo, double hi) {
  double v = 0;
  if (!read_double(text, v) || v < lo || v > hi) {
    const bool any = lo == std::numeric_limits<double>::lowest() && hi == std::numeric_limits<double>::max();
    refuse(what, "finite", any ? std::string() : fmt::format("{:g}..{:g}", lo, hi), text);
  }
  return v == 0 ? 0.0 : v;  // -0 reads as 0: no option means anything by a negative zero
}

std::uint64_t parse_whole(std::string_view text, std::string_view what, std::uint64_t lo, std::uint64_t hi) {
  const std::string range = fmt::format("{}..{}", lo, hi);
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
  std::uint64_t v = 0;
  if (digits) {
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size()) refuse(what, "whole", range, text);  // past 2^64-1
  } else {
    double d = 0;
    // 2^64 is the first double past the range; every whole double below it converts exactly
    if (!read_double(text, d) || d != std::floor(d) || d < 0 || d >= 18446744073709551616.0)
      refuse(what, "whole", range, text);
    v = static_cast<std::uint64_t>(d);
  }
  if (v < lo || v > hi) refuse(what, "whole", range, text);
  return v;
}

}  // namespace lowbit
