// Bug class: flushing subnormal results to zero (a kernel built with flush-to-zero, or a hand-written
// cast without the subnormal path): every E4M3 code with a zero exponent field and a nonzero mantissa
// becomes a zero of its sign.
#include "lowbit/fp8.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "fp8.e4m3fn.satfinite";
const char* const kBug = "flush-subnormal-outputs";

void mutate(lowbit::Case& done, const nlohmann::json&) {
  const lowbit::Tensor& old = done.require("codes");
  std::vector<std::uint8_t> codes = old.u8();
  std::vector<float> dequant = done.require("dequant").f32();  // the reference's, NaN widening included
  for (std::size_t i = 0; i < codes.size(); ++i) {
    if ((codes[i] & 0x78) != 0) continue;
    codes[i] &= 0x80;  // exponent field 0: subnormal or zero -> zero of its sign
    dequant[i] = lowbit::fp8::decode<lowbit::fp8::E4M3FN>(codes[i]);
  }
  done.add(lowbit::Tensor::from_bytes("codes", old.dtype, old.shape, codes));
  done.add(lowbit::Tensor::from_f32("dequant", done.require("dequant").shape, dequant));
}
}  // namespace mutant
