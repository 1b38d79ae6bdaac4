#pragma once
// Numeric options through lowbit's one number parser (lowbit/strict_number.hpp): the whole text is
// the number, in the range the option states; anything else ("", "-1" for a count, 2^64, "nan",
// "1.5" for a whole number) is a usage error naming the option and its range (exit 2), never a
// wrapped or defaulted value. CLI11's own conversions read "-1" into an unsigned option as 2^64-1.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

namespace lowbit::cli {

// --check-elements: at most the largest input a generator makes (lowbit/generators.hpp kMaxCount)
inline constexpr std::uint64_t kMaxCheckElements = std::uint64_t{1} << 28;

// parse_whole / parse_real for an option, their error as CLI11's ValidationError (a usage error).
std::uint64_t option_whole(const std::string& name, const std::string& text, std::uint64_t lo, std::uint64_t hi);
double option_real(const std::string& name, const std::string& text, double lo, double hi);

// A whole-number option into `target` (its current value is the default shown in --help).
template <class T>
  requires std::is_integral_v<T>
CLI::Option* add_whole_option(CLI::App& app, const std::string& name, T& target, T lo, T hi, const std::string& description) {
  static_assert(sizeof(T) <= sizeof(std::uint64_t));
  const auto lo64 = static_cast<std::uint64_t>(lo), hi64 = static_cast<std::uint64_t>(hi);  // ranges are never negative
  CLI::Option* o = app.add_option_function<std::string>(
      name, [&target, name, lo64, hi64](const std::string& text) { target = static_cast<T>(option_whole(name, text, lo64, hi64)); },
      description + " (" + std::to_string(lo64) + " to " + std::to_string(hi64) + ")");
  return o->type_name("UINT")->default_str(std::to_string(target));
}

// A finite real option into `target`.
CLI::Option* add_real_option(CLI::App& app, const std::string& name, double& target, double lo, double hi,
                             const std::string& description);

}  // namespace lowbit::cli
