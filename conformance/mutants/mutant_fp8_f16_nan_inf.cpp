// Bug class: an f16 input cast to E5M2 by the bit trick (h + 0x7F + lsb) >> 8 on its magnitude (E5M2
// is f16 with 8 fewer mantissa bits: right for every finite value, subnormals and overflow included)
// with the NaN test made on the result: an f16 NaN whose payload lies in the 8 dropped bits (0x7C01 to
// 0x7C80, either sign) rounds down to 0x7C, Inf, where the cast writes a NaN. The float32 path is
// right, so every float32 input passes; only an F16 input tensor holding such a NaN (all-f16:dtype=f16)
// shows it.
#include "lowbit/fp8.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "fp8.e5m2.inf";
const char* const kBug = "f16-nan-rounded-to-inf";

void mutate(lowbit::Case& done, const nlohmann::json&) {
  const lowbit::Tensor& input = done.require("input");
  if (input.dtype != lowbit::DType::F16) return;
  const lowbit::Tensor& old = done.require("codes");
  std::vector<std::uint8_t> codes = old.u8();
  std::vector<float> dequant = done.require("dequant").f32();
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const auto h = static_cast<std::uint32_t>(input.bits_at(i));
    const std::uint32_t magnitude = h & 0x7FFFu;
    const std::uint32_t rounded = (magnitude + 0x7Fu + ((magnitude >> 8) & 1u)) >> 8;
    if (magnitude <= 0x7C00u || rounded != 0x7Cu) continue;  // a number, or a NaN that stays one
    codes[i] = static_cast<std::uint8_t>(((h >> 8) & 0x80u) | 0x7Cu);
    dequant[i] = lowbit::fp8::decode<lowbit::fp8::E5M2>(codes[i]);
  }
  done.add(lowbit::Tensor::from_bytes("codes", old.dtype, old.shape, codes));
  done.add(lowbit::Tensor::from_f32("dequant", old.shape, dequant));
}
}  // namespace mutant
