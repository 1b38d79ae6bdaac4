// Bug class: the last partial block left unquantized (a kernel whose grid covers whole blocks only,
// n / block_size rounded down): the tail's codes stay 0 and dequantize to qmap[0] * absmax.
#include "lowbit/blockwise.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "tail-block-codes-left-zero";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  const auto block = params.at("block_size").get<std::size_t>();
  const lowbit::Tensor& old = done.require("codes");
  std::vector<std::uint8_t> codes = old.u8();
  for (std::size_t i = codes.size() / block * block; i < codes.size(); ++i) codes[i] = 0;
  const std::vector<float> scale = done.require("scale").f32(), qmap = done.require("qmap").f32();
  const std::vector<std::int64_t> shape = old.shape, dequant_shape = done.require("dequant").shape;
  done.add(lowbit::Tensor::from_bytes("codes", old.dtype, shape, codes));
  done.add(lowbit::Tensor::from_f32("dequant", dequant_shape, lowbit::blockwise::bnb_dequantize(codes, scale, qmap, block)));
}
}  // namespace mutant
