// Bug class: round to nearest with ties away from zero where the cast ties to even (a hand-written
// cast that adds half an ulp and truncates; C's roundf; some emulation libraries): only the exact
// midpoints between two E4M3 codes change, each to the code of larger magnitude.
#include "lowbit/fp8.hpp"
#include "mutant_fp8_recast.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "fp8.e4m3fn.satfinite";
const char* const kBug = "ties-away-instead-of-even";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using lowbit::fp8::E4M3FN;
  const lowbit::fp8::Policy policy{lowbit::fp8::Overflow::SatFinite,
                                   *lowbit::fp8::parse_nan_encoding(params.at("nan_encoding").get<std::string>(),
                                                                    lowbit::fp8::FormatId::E4M3FN)};
  const auto ties_away = [](const lowbit::fp8::detail::Truncated& t) {
    return t.shift < 64 && t.rem >= (std::uint64_t{1} << (t.shift - 1));
  };
  recast<E4M3FN>(done, [&](float x) { return lowbit::fp8::detail::encode_with<E4M3FN>(x, policy, ties_away); });
}
}  // namespace mutant
