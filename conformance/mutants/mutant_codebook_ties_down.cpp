// Bug class: ties to the lower code where torchao's codebook search ties up (a kernel that brackets
// with lower_bound and keeps the lower entry on equal distances, as bitsandbytes' CPU search does):
// the exact nearest entry, ties to the lower index.
#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "torchao.codebook8.signed";
const char* const kBug = "ties-down-instead-of-up";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  const auto block = params.at("block_size").get<std::size_t>();
  const std::vector<float> x = done.require("input").f32(), scale = done.require("scale").f32(),
                           qmap = done.require("qmap").f32();
  std::vector<std::uint8_t> codes(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    codes[i] = lowbit::codebook::exact_nearest(x[i] / scale[i / block], qmap, lowbit::codebook::Ties::Lower);
  const lowbit::Tensor& old = done.require("codes");
  done.add(lowbit::Tensor::from_bytes("codes", old.dtype, old.shape, codes));
  done.add(lowbit::Tensor::from_f32("dequant", done.require("dequant").shape,
                                    lowbit::blockwise::torchao_dequantize(codes, scale, qmap, block)));
}
}  // namespace mutant
