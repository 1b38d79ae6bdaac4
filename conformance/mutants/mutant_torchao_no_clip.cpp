// Bug class: the block scale without torchao's clip, scale = amax where torchao has max(amax, 1e-12).
// The same wherever a block's absmax is 1e-12 or more: only blocks of a tiny absmax (tiny-blocks) and
// all-zero blocks (special-blocks: 0 / 0 is NaN, code 0) show it; before them only golden cases did.
#include <cmath>

#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "torchao.codebook8.signed";
const char* const kBug = "scale-without-1e-12-clip";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  const auto block = params.at("block_size").get<std::size_t>();
  const std::vector<float> x = done.require("input").f32(), qmap = done.require("qmap").f32();
  std::vector<float> scale = done.require("scale").f32();
  std::vector<std::uint8_t> codes(x.size());
  for (std::size_t b = 0; b < scale.size(); ++b) {
    if (!std::isnan(scale[b])) {  // the reference's NaN rule kept: only the clip is missing
      float amax = 0.0f;
      for (std::size_t i = b * block; i < (b + 1) * block; ++i) amax = std::max(amax, std::fabs(x[i]));
      scale[b] = amax;
    }
    for (std::size_t i = b * block; i < (b + 1) * block; ++i) codes[i] = lowbit::codebook::torchao_search(x[i] / scale[b], qmap);
  }
  const lowbit::Tensor& old = done.require("codes");
  done.add(lowbit::Tensor::from_bytes("codes", old.dtype, old.shape, codes));
  done.add(lowbit::Tensor::from_f32("scale", done.require("scale").shape, scale));
  done.add(lowbit::Tensor::from_f32("dequant", done.require("dequant").shape,
                                    lowbit::blockwise::torchao_dequantize(codes, scale, qmap, block)));
}
}  // namespace mutant
