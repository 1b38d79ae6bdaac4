// Bug class: multiplying by the reciprocal of the block's scale instead of dividing by it (torchao's
// arithmetic on the CPU against a CUDA kernel's): y = x * (1 / scale) rounds differently from x / scale
// near the codebook's decision thresholds under a scale that is not a power of two.
#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "torchao.codebook8.signed";
const char* const kBug = "reciprocal-instead-of-division";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  const auto block = params.at("block_size").get<std::size_t>();
  const std::vector<float> x = done.require("input").f32(), scale = done.require("scale").f32(),
                           qmap = done.require("qmap").f32();
  std::vector<std::uint8_t> codes(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) codes[i] = lowbit::codebook::torchao_search(x[i] * (1.0f / scale[i / block]), qmap);
  const lowbit::Tensor& old = done.require("codes");
  done.add(lowbit::Tensor::from_bytes("codes", old.dtype, old.shape, codes));
  done.add(lowbit::Tensor::from_f32("dequant", done.require("dequant").shape,
                                    lowbit::blockwise::torchao_dequantize(codes, scale, qmap, block)));
}
}  // namespace mutant
