// Bug class: in a block whose scale is 0 (all zeros), a -0.0 input coded as -0 (0x80), where
// fp8.perblock.e4m3 writes code 0x00 for every element of such a block (its dequant then -0 * 0 = -0
// against +0). A -0.0 in a block of a nonzero scale is coded 0x80 by the format too, so only a zero
// block holding -0.0 (special-blocks) shows it.
#include <cmath>

#include "lowbit/blockwise.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "fp8.perblock.e4m3";
const char* const kBug = "zero-block-keeps-sign";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  const auto block = params.at("block_size").get<std::size_t>();
  const std::vector<float> x = done.require("input").f32(), scale = done.require("scale").f32();
  const lowbit::Tensor& old = done.require("codes");
  std::vector<std::uint8_t> codes = old.u8();
  for (std::size_t i = 0; i < x.size(); ++i)
    if (scale[i / block] == 0.0f && x[i] == 0.0f && std::signbit(x[i])) codes[i] = 0x80;
  done.add(lowbit::Tensor::from_bytes("codes", old.dtype, old.shape, codes));
  done.add(lowbit::Tensor::from_f32("dequant", done.require("dequant").shape,
                                    lowbit::blockwise::fp8_perblock_dequantize(codes, scale, block)));
}
}  // namespace mutant
