// Bug class: a NaN block scale that keeps the first NaN element's bits (sign and payload, as an
// amax that returns the NaN it met would), where torch's amax gives its canonical NaN 0x7FC00000. The
// battery's NaNs were all 0x7FC00000 or its negative after a positive one (special): only the all-NaN
// block of special-blocks, whose first NaN is 0xFFC00001, shows it. The codes stay the reference's.
#include <cmath>

#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "torchao.fp8";
const char* const kBug = "nan-scale-copied-from-element";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  const auto block = params.at("block_size").get<std::size_t>();
  const std::vector<float> x = done.require("input").f32();
  std::vector<float> scale = done.require("scale").f32();
  for (std::size_t b = 0; b < scale.size(); ++b) {
    if (!std::isnan(scale[b])) continue;
    for (std::size_t i = b * block; i < (b + 1) * block; ++i)
      if (std::isnan(x[i])) {
        scale[b] = x[i] / 448.0f;  // x86 keeps the NaN operand's sign and payload
        break;
      }
  }
  done.add(lowbit::Tensor::from_f32("scale", done.require("scale").shape, scale));
}
}  // namespace mutant
