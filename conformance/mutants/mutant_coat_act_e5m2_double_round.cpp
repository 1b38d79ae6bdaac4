// Bug class: COAT's per-group E5M2 codes cast through binary16 on the GPU path (x / S rounded to f16,
// nearest even, then the f16 to E5M2, nearest even): two roundings where sm_90's
// cvt.rn.satfinite.e5m2x2.f32 rounds the float once, so a value just past an E5M2 midpoint that
// rounds onto the midpoint in f16 then ties to even. Only with fp8=e5m2 and casts=gpu; E4M3 and the
// interpreter's casts are the reference's.
#include <cmath>

#include "mutant_coat_act.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.act.pergroup";
const char* const kBug = "coat-act-e5m2-through-f16";

namespace {
// float -> IEEE binary16 bits, round to nearest even on the bit fields; Inf past 65504's rounding
// range, NaN kept quiet.
std::uint16_t to_f16_bits(float x) {
  const std::uint32_t u = lowbit::bits_of(x);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;
  if (a >= 0x477FF000u) return sign | 0x7C00u;  // 65520 and above round to Inf
  if (a < 0x38800000u)  // below 2^-14: an f16 subnormal, a whole number of 2^-24 (exact scaling, then nearest even)
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(lowbit::float_from_bits(a) * 0x1p24f)));
  std::uint32_t h = ((a >> 23) - 127 + 15) << 10 | ((a & 0x7FFFFFu) >> 13);
  const std::uint32_t rem = a & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}
}  // namespace

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  if (params.at("fp8") != "e5m2" || params.at("casts") != "gpu") return;
  const auto divide = coat_division(params);
  requantize_groups(
      done, params, [](float s, bool) { return s; },
      [divide](float x, float s) { return lowbit::widen_f16(to_f16_bits(divide(x, s))); });
}
}  // namespace mutant
