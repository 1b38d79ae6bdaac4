// Bug class: a NaN encoded with the wrong sign (CUDA's cuda_fp8.hpp drops a NaN's sign, torch and
// ml_dtypes keep it; a kernel that mixes them up): every E5M2 NaN code gets its sign bit flipped.
#include "lowbit/fp8.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "fp8.e5m2.inf";
const char* const kBug = "nan-sign-flipped";

void mutate(lowbit::Case& done, const nlohmann::json&) {
  const lowbit::Tensor& old = done.require("codes");
  std::vector<std::uint8_t> codes = old.u8();
  for (std::uint8_t& c : codes)
    if (lowbit::fp8::E5M2::is_nan(c)) c ^= 0x80;
  done.add(lowbit::Tensor::from_bytes("codes", old.dtype, old.shape, codes));  // dequant: NaN either way
}
}  // namespace mutant
