#pragma once
// For coat.act.pergroup mutants: codes and stored scale recomputed from each group's fp32 scale S as the
// reference computes it, with the mutant's bug applied to S or to the value the cast rounds.
#include <cmath>
#include <functional>
#include <vector>

#include "lowbit/case.hpp"
#include "lowbit/coat_activation.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/fp8.hpp"

namespace mutant {

// The case's codes and stored scale (or those named: codes_t and scale_t, whose element i is input
// element input_of(i)) made again from the fp32 scale s[g] of each group g (in block_map's order):
// code = cast(scaled(x, s[its group])), the stored scale from s as the reference stores one.
inline void requantize_with_scales(lowbit::Case& done, const nlohmann::json& params, const std::vector<float>& s,
                                   const std::function<float(float x, float s)>& scaled, const char* codes_name = "codes",
                                   const char* scale_name = "scale",
                                   const std::function<std::size_t(std::size_t)>& input_of = nullptr) {
  using namespace lowbit;
  const Tensor& input = done.require("input");
  const BlockMap groups = block_map(done, codes_name);
  const fp8::FormatId fp8 = fp8::format_from_param(params.at("fp8").get<std::string>(), "fp8");
  const coat_act::Casts casts = params.at("casts") == "gpu" ? coat_act::Casts::Gpu : coat_act::Casts::TritonInterpreter;
  std::vector<std::uint8_t> codes(input.element_count());
  for (std::size_t i = 0; i < codes.size(); ++i)
    codes[i] = coat_act::cast_fp8(scaled(input.value_as_float(input_of ? input_of(i) : i), s[groups.block_of(i)]), fp8, casts);
  const Tensor& old_scale = done.require(scale_name);
  const auto dtype = old_scale.dtype == DType::BF16 ? coat_act::ScaleDtype::BF16 : coat_act::ScaleDtype::F32;
  std::vector<std::uint8_t> scale_bytes;
  for (std::size_t g = 0; g < s.size(); ++g) {
    const std::uint32_t u = lowbit::bits_of(coat_act::stored_scale(s[g], dtype, casts));
    if (dtype == coat_act::ScaleDtype::BF16) {
      scale_bytes.push_back(static_cast<std::uint8_t>(u >> 16));
      scale_bytes.push_back(static_cast<std::uint8_t>(u >> 24));
    } else {
      for (int b = 0; b < 4; ++b) scale_bytes.push_back(static_cast<std::uint8_t>(u >> (8 * b)));
    }
  }
  const Tensor& old_codes = done.require(codes_name);
  done.add(Tensor::from_bytes(codes_name, old_codes.dtype, old_codes.shape, codes));
  done.add(Tensor::from_bytes(scale_name, old_scale.dtype, old_scale.shape, scale_bytes));
}

// scale_of(S, the group holds a NaN): the scale the mutant uses; scaled(x, s): the value the cast rounds
// (coat_act::div in COAT). S is the reference's own: its stored scale when run with scale_dtype f32.
inline void requantize_groups(lowbit::Case& done, const nlohmann::json& params,
                              const std::function<float(float s, bool has_nan)>& scale_of,
                              const std::function<float(float x, float s)>& scaled) {
  using namespace lowbit;
  const FormatSpec& f = *find_format(done.format());
  nlohmann::json f32 = params;
  f32["scale_dtype"] = "f32";
  std::vector<float> s;
  for (const Tensor& t : f.run(done, f32, 1))
    if (t.name == "scale") s = t.f32();
  const Tensor& input = done.require("input");
  const BlockMap groups = block_map(done, "codes");
  std::vector<bool> has_nan(s.size());
  for (std::size_t i = 0; i < input.element_count(); ++i)
    if (std::isnan(input.value_as_float(i))) has_nan[groups.block_of(i)] = true;
  for (std::size_t g = 0; g < s.size(); ++g) s[g] = scale_of(s[g], has_nan[g]);
  requantize_with_scales(done, params, s, scaled);
}

// COAT's S from a group's absmax (coat_act::group_scale) under the case's fp8 and division params.
inline float scale_from_absmax(float absmax, const nlohmann::json& params) {
  lowbit::coat_act::Options o;
  o.fp8 = lowbit::fp8::format_from_param(params.at("fp8").get<std::string>(), "fp8");
  o.division = params.at("division") == "ieee" ? lowbit::coat_act::Division::Ieee : lowbit::coat_act::Division::DivFull;
  return lowbit::coat_act::group_scale(absmax, o);
}

// COAT's division under the case's division param.
inline std::function<float(float x, float s)> coat_division(const nlohmann::json& params) {
  const auto d = params.at("division") == "ieee" ? lowbit::coat_act::Division::Ieee : lowbit::coat_act::Division::DivFull;
  return [d](float x, float s) { return lowbit::coat_act::div(x, s, d); };
}

}  // namespace mutant
