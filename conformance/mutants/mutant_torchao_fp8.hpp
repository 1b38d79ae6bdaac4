#pragma once
// For torchao.fp8 mutants: the state recomputed from the case's input with another block scale (the
// bug), codes and dequant as torchao computes them from a scale.
#include <functional>
#include <span>

#include "lowbit/blockwise.hpp"
#include "lowbit/case.hpp"
#include "lowbit/fp8.hpp"

namespace mutant {

// scaled: the value the cast rounds, x / scale in torchao (a mutant of the element arithmetic passes its own).
inline void requantize(lowbit::Case& done, const nlohmann::json& params,
                       const std::function<float(std::span<const float> block)>& scale_of,
                       const std::function<float(float x, float scale)>& scaled = [](float x, float s) { return x / s; }) {
  using lowbit::fp8::E4M3FN;
  const auto block = params.at("block_size").get<std::size_t>();
  const lowbit::fp8::Policy policy{*lowbit::fp8::parse_overflow(params.at("overflow").get<std::string>()),
                                   *lowbit::fp8::parse_nan_encoding(params.at("nan_encoding").get<std::string>(),
                                                                    lowbit::fp8::FormatId::E4M3FN)};
  const std::vector<float> x = done.require("input").f32();
  std::vector<std::uint8_t> codes(x.size());
  std::vector<float> scale;
  for (std::size_t start = 0; start < x.size(); start += block) {
    const float s = scale_of(std::span<const float>(x).subspan(start, block));
    scale.push_back(s);
    for (std::size_t i = start; i < start + block; ++i) codes[i] = lowbit::fp8::encode_nearest_even<E4M3FN>(scaled(x[i], s), policy);
  }
  const auto widening =
      lowbit::fp8::parse_nan_widening(params.value("nan_widening", std::string("c10"))).value_or(lowbit::fp8::NanWidening::Payload);
  const lowbit::Tensor& old_codes = done.require("codes");
  const lowbit::Tensor& old_scale = done.require("scale");
  const std::vector<std::int64_t> code_shape = old_codes.shape, scale_shape = old_scale.shape,
                                  dequant_shape = done.require("dequant").shape;
  const lowbit::DType code_dtype = old_codes.dtype;
  const std::vector<float> dequant = lowbit::blockwise::torchao_fp8_dequantize(codes, scale, block, widening);
  done.add(lowbit::Tensor::from_bytes("codes", code_dtype, code_shape, codes));
  done.add(lowbit::Tensor::from_f32("scale", scale_shape, scale));
  done.add(lowbit::Tensor::from_f32("dequant", dequant_shape, dequant));
}

// torchao's scale from a block's absmax (computed by the mutant, rightly or not): the reference's
// clip and NaN rule applied to that one value (a one-element block whose amax it is), then / 448, so
// that the mutant differs from the reference only in its bug.
inline float torchao_scale(float amax) {
  return lowbit::blockwise::torchao_fp8_clipped_amax(std::span<const float>(&amax, 1)) / 448.0f;
}

}  // namespace mutant
