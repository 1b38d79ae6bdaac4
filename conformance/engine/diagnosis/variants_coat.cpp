// The variants of COAT's quantizers. The group activation quantizers (coat.act.pergroup,
// coat.act.perblock): codes from x * (1/S) where COAT divides x by its group's fp32 scale S, and a
// group absmax that keeps NaN (torch.amax's rule) where COAT's tl.max skips it; S is the reference's
// own: its stored scale when run with scale_dtype f32. COAT's division and cast rules are variants of
// the parameters division and casts (variants_params.cpp). The transposed one
// (coat.act.pergroup.transposed): y_t as y's transpose. The fake quantizer (coat.fake.symm): a block
// absmax that skips NaN. (The optimizer's: variants_coat_optimizer.cpp.)
#include <algorithm>
#include <cmath>
#include <limits>

#include "../registry/formats_optimizer_io.hpp"
#include "lowbit/coat_activation.hpp"
#include "lowbit/coat_fake.hpp"
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

// y rounded to IEEE binary16 (nearest even, Inf past its range, NaN kept) and widened back: the
// quantum is 2^(e - 10) for y's exponent e, 2^-24 below 2^-14, so y / quantum is exact and one
// nearbyint (the default rounding, to nearest even) rounds it.
float through_f16(float y) {
  if (!std::isfinite(y)) return y;
  const float a = std::fabs(y);
  if (a >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), y);
  const float quantum = std::ldexp(1.0f, (a < 0x1p-14f ? -14 : std::ilogb(a)) - 10);
  return std::copysign(std::nearbyint(a / quantum) * quantum, y);
}

// The case quantized again from each group's fp32 scale S as the reference computes it, NaN where the
// group holds one when keeps_nan, the codes from x * (1/S) when reciprocal (else COAT's division),
// cast through binary16 first when via_f16; the stored scale made from S as the reference stores one
// (bf16 or f32).
std::optional<Case> requantized_groups(const FormatSpec& f, const Case& e, const nlohmann::json& p, bool keeps_nan,
                                       bool reciprocal, bool via_f16 = false) {
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
    codes[i] = coat_act::cast_fp8(via_f16 ? through_f16(y) : y, id, casts);
  }
  Case c = e;
  c.add(Tensor::from_bytes("codes", old_codes.dtype, old_codes.shape, codes));
  const auto dtype = old_scale.dtype == DType::BF16 ? coat_act::ScaleDtype::BF16 : coat_act::ScaleDtype::F32;
  for (float& g : s) g = coat_act::stored_scale(g, dtype, casts);  // exact in the stored dtype
  c.add(optimizer_io::narrowed("scale", old_scale, s));
  return c;
}

// coat.fake.symm with each block's absmax over its non-NaN elements (signalling ones too, which C's
// fmax would return) where torch.amax makes a block holding a NaN all NaN; the rest as SymmQuantizer: scale
// 2 (absmax + epsilon) / (Qp - Qn), Q = the Triton fake FP8 of x / scale, RQ = Q * scale, with the
// NaN bits of the model (x86's: a NaN operand's own, else 0xFFC00000; CUDA's 0x7FFFFFFF).
std::optional<Case> symm_absmax_ignoring_nan(const Case& e, const nlohmann::json& p) {
  const Tensor& input = e.require("input");
  if (input.dtype != DType::F32) return std::nullopt;
  const std::vector<float> x = input.f32();
  const BlockMap blocks = block_map(e, "rq");
  std::vector<float> scale(e.require("scale").element_count(), 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (blocks.block_of(i) >= scale.size()) return std::nullopt;
    if (!std::isnan(x[i])) scale[blocks.block_of(i)] = std::max(scale[blocks.block_of(i)], std::fabs(x[i]));
  }
  const fp8::FormatId id = fp8::format_from_param(p.at("fp8").get<std::string>(), "fp8");
  const auto model = p.at("model") == "gpu" ? coat_fake::Model::Gpu : coat_fake::Model::Interpreter;
  const auto epsilon = static_cast<float>(p.at("epsilon").get<double>());
  for (float& s : scale) s = coat_fake::symm_scale(s + epsilon, id, model);
  const auto nan_of = [model](float result, float operand) {
    if (!std::isnan(result)) return result;
    if (model == coat_fake::Model::Gpu) return float_from_bits(0x7FFFFFFFu);
    return std::isnan(operand) ? float_from_bits(bits_of(operand) | 0x00400000u) : float_from_bits(0xFFC00000u);
  };
  std::vector<float> q(x.size()), rq(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float s = scale[blocks.block_of(i)];
    q[i] = coat_fake::floatexmy_triton(nan_of(x[i] / s, x[i]), id, model);
    rq[i] = nan_of(q[i] * s, q[i]);
  }
  Case c = e;
  c.add(Tensor::from_f32("q", input.shape, q));
  c.add(Tensor::from_f32("rq", input.shape, rq));
  c.add(Tensor::from_f32("scale", e.require("scale").shape, scale));
  return c;
}

// coat.act.pergroup.transposed with y_t written as y's transpose (its 1 x QB groups along x's rows)
// and s_y's entries as s_y_t's, where COAT quantizes x^T with its own groups along M.
std::optional<Case> transpose_of_rows(const Case& e) {
  const Tensor& codes = e.require("codes");
  const Tensor& codes_t = e.require("codes_t");
  const Tensor& scale = e.require("scale");
  const Tensor& scale_t = e.require("scale_t");
  if (codes.shape.size() != 2 || codes.dtype != codes_t.dtype || codes.bytes.size() != codes_t.bytes.size() ||
      scale.dtype != scale_t.dtype || scale.bytes.size() != scale_t.bytes.size())
    return std::nullopt;
  const auto m = static_cast<std::size_t>(codes.shape[0]), n = static_cast<std::size_t>(codes.shape[1]);
  std::vector<std::uint8_t> transposed(codes.bytes.size());
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t col = 0; col < n; ++col) transposed[col * m + r] = codes.bytes[r * n + col];
  Case c = e;
  c.add(Tensor::from_bytes("codes_t", codes_t.dtype, codes_t.shape, transposed));
  c.add(Tensor::from_bytes("scale_t", scale_t.dtype, scale_t.shape, scale.bytes));
  return c;
}

}  // namespace

void add_coat_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  if (f.name == "coat.fake.symm") {
    out.push_back({"block-absmax-ignores-nan", "the reference with a block absmax that skips NaN where torch.amax keeps it",
                   symm_absmax_ignoring_nan});
    return;
  }
  if (f.name == "coat.act.pergroup.transposed") {
    out.push_back({"transpose-of-rows",
                   "the reference with y_t the transpose of y (groups along x's rows) and s_y as s_y_t, where COAT "
                   "quantizes x^T with its own groups",
                   [](const Case& e, const nlohmann::json&) { return transpose_of_rows(e); }});
    return;
  }
  if (f.name != "coat.act.pergroup" && f.name != "coat.act.perblock") return;
  const FormatSpec* spec = &f;
  out.push_back({"reciprocal", "the reference with x * (1 / S) for x / S",
                 [spec](const Case& e, const nlohmann::json& p) { return requantized_groups(*spec, e, p, false, true); }});
  out.push_back({"absmax-keeps-nan", "the reference with a group absmax that keeps NaN (torch.amax's rule)",
                 [spec](const Case& e, const nlohmann::json& p) { return requantized_groups(*spec, e, p, true, false); }});
  // a GPU E5M2 cast made of two roundings, float to f16 to E5M2 (a cast written through __half), where
  // sm_90's cvt.rn.satfinite.e5m2x2.f32 rounds once; only E5M2 under casts=gpu has it
  out.push_back({"e5m2-double-rounding",
                 "the reference with the E5M2 cast through binary16 (x / S rounded to f16, then to E5M2, each to "
                 "nearest even) where the GPU's cvt.rn.satfinite.e5m2x2.f32 rounds once",
                 [spec](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                   if (p.at("fp8") != "e5m2" || p.at("casts") != "gpu") return std::nullopt;
                   return requantized_groups(*spec, e, p, false, false, true);
                 }});
}

}  // namespace lowbit::diagnosis
