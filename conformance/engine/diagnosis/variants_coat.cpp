// The variants of COAT's group activation quantizers (coat.act.pergroup, coat.act.perblock): codes
// from x * (1/S) where COAT divides x by its group's fp32 scale S, and a group absmax that keeps NaN
// (torch.amax's rule) where COAT's tl.max skips it. S is the reference's own: its stored scale when
// run with scale_dtype f32. COAT's division and cast rules are variants of the parameters division and
// casts (variants_params.cpp).
#include <cmath>
#include <limits>

#include "lowbit/coat_activation.hpp"
#include "lowbit/float_bits.hpp"
#include "variants.hpp"

namespace lowbit::diagnosis {

namespace {

// Each group's fp32 scale S as the reference computes it: its stored scale when run with scale_dtype f32.
std::vector<float> fp32_scales(const FormatSpec& f, const Case& e, const nlohmann::json& p) {
  nlohmann::json params = p;
  params["scale_dtype"] = "f32";
  for (const Tensor& t : f.run(e, params, 1))
    if (t.name == "scale") return t.f32();
  return {};
}

// The case quantized again from each group's fp32 scale S as the reference computes it, NaN where the
// group holds one when keeps_nan, the codes from x * (1/S) when reciprocal (else COAT's division); the
// stored scale made from S as the reference stores one (bf16 or f32).
std::optional<Case> requantized_groups(const FormatSpec& f, const Case& e, const nlohmann::json& p, bool keeps_nan,
                                       bool reciprocal) {
  const Tensor& input = e.require("input");
  const Tensor& old_scale = e.require("scale");
  const Tensor& old_codes = e.require("codes");
  const BlockMap groups = block_map(e, "codes");
  std::vector<float> s = fp32_scales(f, e, p);
  if (s.size() != old_scale.element_count() || old_codes.bytes.size() != input.element_count()) return std::nullopt;
  // torch.amax's rule: a group holding a NaN gets a NaN scale
  for (std::size_t i = 0; keeps_nan && i < input.element_count(); ++i)
    if (std::isnan(input.value_as_float(i))) s.at(groups.block_of(i)) = std::numeric_limits<float>::quiet_NaN();
  const fp8::FormatId id = fp8::format_from_param(p.at("fp8").get<std::string>(), "fp8");
  const auto casts = p.at("casts") == "gpu" ? coat_act::Casts::Gpu : coat_act::Casts::TritonInterpreter;
  const auto division = p.at("division") == "ieee" ? coat_act::Division::Ieee : coat_act::Division::DivFull;
  std::vector<std::uint8_t> codes(input.element_count());
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const float x = input.value_as_float(i), g = s[groups.block_of(i)];
    // the reciprocal's NaN is the division's: only the arithmetic differs
    const float y = reciprocal && !std::isnan(x) && !std::isnan(g) ? x * (1.0f / g) : coat_act::div(x, g, division);
    codes[i] = coat_act::cast_fp8(y, id, casts);
  }
  Case c = e;
  c.add(Tensor::from_bytes("codes", old_codes.dtype, old_codes.shape, codes));
  const auto dtype = old_scale.dtype == DType::BF16 ? coat_act::ScaleDtype::BF16 : coat_act::ScaleDtype::F32;
  std::vector<std::uint8_t> bytes;
  for (float g : s) {
    const std::uint32_t u = bits_of(coat_act::stored_scale(g, dtype, casts));
    if (dtype == coat_act::ScaleDtype::BF16)
      for (int b = 2; b < 4; ++b) bytes.push_back(static_cast<std::uint8_t>(u >> (8 * b)));
    else
      for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<std::uint8_t>(u >> (8 * b)));
  }
  c.add(Tensor::from_bytes("scale", old_scale.dtype, old_scale.shape, bytes));
  return c;
}

}  // namespace

void add_coat_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  if (f.name != "coat.act.pergroup" && f.name != "coat.act.perblock") return;
  const FormatSpec* spec = &f;
  out.push_back({"reciprocal", "the reference with x * (1 / S) for x / S",
                 [spec](const Case& e, const nlohmann::json& p) { return requantized_groups(*spec, e, p, false, true); }});
  out.push_back({"absmax-keeps-nan", "the reference with a group absmax that keeps NaN (torch.amax's rule)",
                 [spec](const Case& e, const nlohmann::json& p) { return requantized_groups(*spec, e, p, true, false); }});
}

}  // namespace lowbit::diagnosis
