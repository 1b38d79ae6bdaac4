// Bug class: the dequantized values of a bf16 input (bitsandbytes returns the input's dtype) written as
// the top 16 bits of the float32 q[code] * absmax, truncated toward zero, where bitsandbytes' CPU
// float_to_bf16 rounds to nearest even. About half of all values differ by one bf16 ulp; a float32 or
// f16 input is right. Only a BF16 input tensor (the battery's normal and special-blocks with
// dtype=bf16, and bitsandbytes' own bf16 golden cases) shows it.
#include "lowbit/blockwise.hpp"
#include "lowbit/float_bits.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "bf16-dequant-truncated";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  if (done.require("input").dtype != lowbit::DType::BF16) return;
  const std::size_t block = params.at("block_size").get<std::size_t>();
  const std::vector<float> d = lowbit::blockwise::bnb_dequantize(done.require("codes").u8(), done.require("scale").f32(),
                                                                 done.require("qmap").f32(), block);
  std::vector<std::uint8_t> bytes(d.size() * 2);
  for (std::size_t i = 0; i < d.size(); ++i) {
    const std::uint32_t top = lowbit::bits_of(d[i]) >> 16;  // the slip: no rounding
    bytes[2 * i] = static_cast<std::uint8_t>(top);
    bytes[2 * i + 1] = static_cast<std::uint8_t>(top >> 8);
  }
  const lowbit::Tensor& old = done.require("dequant");
  done.add(lowbit::Tensor::from_bytes("dequant", old.dtype, old.shape, bytes));
}
}  // namespace mutant
