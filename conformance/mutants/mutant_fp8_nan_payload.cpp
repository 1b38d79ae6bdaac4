// Bug class: a NaN encoded with another payload (ml_dtypes writes E5M2's quiet NaN S.11111.10, torch
// and CUDA S.11111.11; a kernel that copies the wrong table): every E5M2 NaN code becomes
// S.11111.10 if it was S.11111.11, and S.11111.11 otherwise, its sign kept.
#include "lowbit/fp8.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "fp8.e5m2.inf";
const char* const kBug = "nan-payload-changed";

void mutate(lowbit::Case& done, const nlohmann::json&) {
  const lowbit::Tensor& old = done.require("codes");
  std::vector<std::uint8_t> codes = old.u8();
  for (std::uint8_t& c : codes)
    if (lowbit::fp8::E5M2::is_nan(c)) c = static_cast<std::uint8_t>((c & 0x80) | ((c & 0x7F) == 0x7F ? 0x7E : 0x7F));
  done.add(lowbit::Tensor::from_bytes("codes", old.dtype, old.shape, codes));  // dequant: NaN either way
}
}  // namespace mutant
