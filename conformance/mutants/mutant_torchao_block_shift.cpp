// Bug class: an element's block found by a shift, i >> ctz(block_size), as if the block size were a
// power of two: each element is divided by the scale of stored block i >> ctz(block_size) (the last
// one past the end; the scales themselves are right), its dequant by its own block's. torchao takes
// any block size that divides the state; at a power of two the shift is the division, so only the
// battery's run at a block size that is not one (33) shows it.
#include <algorithm>
#include <bit>

#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "torchao.codebook8.signed";
const char* const kBug = "block-index-by-shift";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  const auto block = params.at("block_size").get<std::size_t>();
  const std::vector<float> x = done.require("input").f32(), scale = done.require("scale").f32(),
                           qmap = done.require("qmap").f32();
  const int shift = std::countr_zero(block);
  std::vector<std::uint8_t> codes(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    codes[i] = lowbit::codebook::torchao_search(x[i] / scale[std::min(i >> shift, scale.size() - 1)], qmap);
  const lowbit::Tensor& old = done.require("codes");
  done.add(lowbit::Tensor::from_bytes("codes", old.dtype, old.shape, codes));
  done.add(lowbit::Tensor::from_f32("dequant", done.require("dequant").shape,
                                    lowbit::blockwise::torchao_dequantize(codes, scale, qmap, block)));
}
}  // namespace mutant
