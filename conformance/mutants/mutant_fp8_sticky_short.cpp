// Bug class: the sticky bit of a hand-written encoder taken one bit short (mask (1 << (shift - 2)) - 1
// for (1 << (shift - 1)) - 1): it misses the bit just below the round bit. A value above a midpoint by
// that bit alone (1.09375, 0x3F8C0000: round bit and the bit below it set, every other discarded bit
// zero) is taken for a tie and rounds to even, down where the cast rounds up. Every other value rounds
// right: the edges' midpoints and their float32 neighbours (whose lowest bit is the sticky one) and
// random floats (whose 18 low bits are never all zero) pass; every bf16 or f16 value as float32
// (all-bf16, all-f16) holds that pattern at every exponent.
#include "lowbit/fp8.hpp"
#include "mutant_fp8_recast.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "fp8.e4m3fn.satfinite";
const char* const kBug = "sticky-bit-one-short";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using lowbit::fp8::E4M3FN;
  const lowbit::fp8::Policy policy{lowbit::fp8::Overflow::SatFinite,
                                   *lowbit::fp8::parse_nan_encoding(params.at("nan_encoding").get<std::string>(),
                                                                    lowbit::fp8::FormatId::E4M3FN)};
  const auto short_sticky = [](const lowbit::fp8::detail::Truncated& t) {
    if (t.shift >= 64) return false;  // far below the smallest step: rounds to zero either way
    const bool round = (t.rem >> (t.shift - 1)) & 1u;
    const bool sticky = t.shift >= 2 && (t.rem & ((std::uint64_t{1} << (t.shift - 2)) - 1)) != 0;  // the slip
    return round && (sticky || (t.code & 1u));
  };
  recast<E4M3FN>(done, [&](float x) { return lowbit::fp8::detail::encode_with<E4M3FN>(x, policy, short_sticky); });
}
}  // namespace mutant
