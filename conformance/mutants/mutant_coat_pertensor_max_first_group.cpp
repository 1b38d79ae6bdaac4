// Bug class: COAT's per-tensor scale taken as a running maximum that starts from the first group's
// bf16 scale and replaces it when a later one compares greater (if (s_g > s) s = s_g), where torch.max
// of the group scales propagates every NaN: a group of NaNs alone makes the tensor scale NaN only when
// it is the tensor's first group. The codes are divided by the kernel's own tensor scale.
#include <cmath>

#include "mutant_coat_act.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.act.pertensor.groupscale";
const char* const kBug = "coat-pertensor-max-from-first-group";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using namespace lowbit;
  const Tensor& gs = done.require("group_scale");
  float s = gs.value_as_float(0);
  for (std::size_t g = 1; g < gs.element_count(); ++g) {
    const float v = gs.value_as_float(g);
    if (v > s) s = v;
  }
  const Tensor& input = done.require("input");
  const Tensor& old_codes = done.require("codes");
  const fp8::FormatId fp8 = fp8::format_from_param(params.at("fp8").get<std::string>(), "fp8");
  const coat_act::Casts casts = params.at("casts") == "gpu" ? coat_act::Casts::Gpu : coat_act::Casts::TritonInterpreter;
  const auto divide = coat_division(params);
  std::vector<std::uint8_t> codes(input.element_count());
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = coat_act::cast_fp8(divide(input.value_as_float(i), s), fp8, casts);
  done.add(Tensor::from_bytes("codes", old_codes.dtype, old_codes.shape, codes));
  // a group's bf16 scale; a NaN (the first group's) stored as torch's 0x7FC0, as the reference's max stores one
  const std::uint32_t u = std::isnan(s) ? 0x7FC0u : bits_of(s) >> 16;
  const Tensor& old_scale = done.require("scale");
  const std::vector<std::uint8_t> bytes = {static_cast<std::uint8_t>(u), static_cast<std::uint8_t>(u >> 8)};
  done.add(Tensor::from_bytes("scale", old_scale.dtype, old_scale.shape, bytes));
}
}  // namespace mutant
