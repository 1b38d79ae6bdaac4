#pragma once
// The one parser of every number a user types: the lowbit command's numeric options and the keys of
// input specs (normal:n=...,std=...). A number is the whole text, nothing else: no spaces, no sign
// other than a leading '-', no hex, no inf or nan, never empty; a whole number must be whole and a
// value must lie in the range named in the error. The error names what was parsed, the range and the
// text, so the caller only adds where it came from. (std::stoull reads "-1" as 2^64-1 and std::stod
// an empty text as an error it is easy to turn into 0: the reasons this file exists.)
#include <cstdint>
#include <string>
#include <string_view>

namespace lowbit {

// A finite number in [lo, hi]; std::invalid_argument "WHAT must be a finite number in LO..HI (got TEXT)"
// ("... a finite number (got TEXT)" for the whole finite range). Decimal, with an optional fraction
// and exponent (1e-3, 0.5, 2); -0 reads as 0.
double parse_real(std::string_view text, std::string_view what, double lo, double hi);

// A whole number in [lo, hi]; std::invalid_argument "WHAT must be a whole number in LO..HI (got TEXT)".
// Digits (exact up to 2^64-1), or a decimal real whose value is whole (1e3, 4096.0); "-1" is below
// every unsigned range, and a value past 2^64-1 is out of range, never wrapped.
std::uint64_t parse_whole(std::string_view text, std::string_view what, std::uint64_t lo, std::uint64_t hi);

}  // namespace lowbit
