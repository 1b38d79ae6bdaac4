// Bug class: saturating where the format overflows to NaN (a kernel built on CUDA's __NV_SATFINITE or
// cvt.rn.satfinite, or torch >= 2.13's saturating cast, standing in for the OCP non-saturating E4M3
// cast of torch <= 2.12): finite values past the largest code and +-Inf become +-448 instead of NaN.
#include "lowbit/fp8.hpp"
#include "mutant_fp8_recast.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "fp8.e4m3fn.nan";
const char* const kBug = "saturate-instead-of-nan";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using lowbit::fp8::E4M3FN;
  const lowbit::fp8::Policy policy{lowbit::fp8::Overflow::SatFinite,
                                   *lowbit::fp8::parse_nan_encoding(params.at("nan_encoding").get<std::string>(),
                                                                    lowbit::fp8::FormatId::E4M3FN)};
  recast<E4M3FN>(done, [&](float x) { return lowbit::fp8::encode_nearest_even<E4M3FN>(x, policy); });
}
}  // namespace mutant
