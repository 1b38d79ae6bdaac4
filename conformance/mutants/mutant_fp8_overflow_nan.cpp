// Bug class: overflowing to NaN where the format saturates (the converse of saturate-instead-of-nan:
// a non-saturating cast, torch <= 2.12's or CUDA's without __NV_SATFINITE, behind a kernel that
// promises satfinite): finite values past the largest code and +-Inf become NaN instead of +-448.
#include "lowbit/fp8.hpp"
#include "mutant_fp8_recast.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "fp8.e4m3fn.satfinite";
const char* const kBug = "nan-instead-of-saturate";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using lowbit::fp8::E4M3FN;
  const lowbit::fp8::Policy policy{lowbit::fp8::Overflow::NaN,
                                   *lowbit::fp8::parse_nan_encoding(params.at("nan_encoding").get<std::string>(),
                                                                    lowbit::fp8::FormatId::E4M3FN)};
  recast<E4M3FN>(done, [&](float x) { return lowbit::fp8::encode_nearest_even<E4M3FN>(x, policy); });
}
}  // namespace mutant
