// Bug class: torchao.fp8's codes from x * (1 / scale) instead of x / scale (a kernel that computes the
// block's reciprocal once and multiplies): under a scale that is not a power of two the two round
// differently near the E4M3 cast's decision thresholds. NaN handling is kept right: where x or the
// scale is NaN the reference's own division decides the NaN's bits, so the only bug is the arithmetic
// (a multiply whose operands the compiler may swap would otherwise pick the other NaN's sign).
#include <cmath>

#include "lowbit/blockwise.hpp"
#include "lowbit/fp8.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "torchao.fp8";
const char* const kBug = "element-reciprocal-instead-of-division";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using lowbit::fp8::E4M3FN;
  const auto block = params.at("block_size").get<std::size_t>();
  const lowbit::fp8::Policy policy{*lowbit::fp8::parse_overflow(params.at("overflow").get<std::string>()),
                                   *lowbit::fp8::parse_nan_encoding(params.at("nan_encoding").get<std::string>(),
                                                                    lowbit::fp8::FormatId::E4M3FN)};
  const std::vector<float> x = done.require("input").f32(), scale = done.require("scale").f32();
  std::vector<std::uint8_t> codes(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float s = scale[i / block];
    const float y = std::isnan(x[i]) || std::isnan(s) ? x[i] / s : x[i] * (1.0f / s);
    codes[i] = lowbit::fp8::encode_nearest_even<E4M3FN>(y, policy);
  }
  const auto widening =
      lowbit::fp8::parse_nan_widening(params.value("nan_widening", std::string("c10"))).value_or(lowbit::fp8::NanWidening::Payload);
  const lowbit::Tensor& old = done.require("codes");
  done.add(lowbit::Tensor::from_bytes("codes", old.dtype, old.shape, codes));
  done.add(lowbit::Tensor::from_f32("dequant", done.require("dequant").shape,
                                    lowbit::blockwise::torchao_fp8_dequantize(codes, scale, block, widening)));
}
}  // namespace mutant
