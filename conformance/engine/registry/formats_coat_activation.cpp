// Registry entries of COAT's activation formats: coat.act.* (docs/formats/coat-activation.md).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "fp8_edges.hpp"
#include "lowbit/coat_activation.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"

namespace lowbit {

namespace {

using namespace coat_act;

Options options_from(const nlohmann::json& p) {
  Options o;
  o.group_size = static_cast<int>(positive_size_param(p, "group_size"));
  o.fp8 = fp8::format_from_param(p.at("fp8").get<std::string>(), "fp8");
  const auto sd = p.at("scale_dtype").get<std::string>();
  if (sd != "bf16" && sd != "f32") throw std::runtime_error("scale_dtype must be bf16 or f32 (got '" + sd + "')");
  o.scale_dtype = sd == "bf16" ? ScaleDtype::BF16 : ScaleDtype::F32;
  const auto dv = p.at("division").get<std::string>();
  if (dv != "ieee" && dv != "div-full")
    throw std::runtime_error("division must be ieee or div-full (got '" + dv + "')");
  o.division = dv == "ieee" ? Division::Ieee : Division::DivFull;
  const auto c = p.at("casts").get<std::string>();
  if (c != "gpu" && c != "triton-interpreter")
    throw std::runtime_error("casts must be gpu or triton-interpreter (got '" + c + "')");
  o.casts = c == "gpu" ? Casts::Gpu : Casts::TritonInterpreter;
  return o;
}

struct Input2d {
  std::vector<float> x;
  std::int64_t m, n;
};

Input2d input_2d(const Case& in) {
  const Tensor& t = in.require("input");
  if (t.shape.size() != 2) throw std::invalid_argument("COAT activation formats take a 2-D input");
  if (t.dtype != DType::F32 && t.dtype != DType::BF16) throw std::invalid_argument("input must be F32 or BF16");
  Input2d r{std::vector<float>(t.element_count()), t.shape[0], t.shape[1]};
  for (std::size_t i = 0; i < r.x.size(); ++i) r.x[i] = t.value_as_float(i);
  return r;
}

DType code_dtype(const Options& o) { return fp8::format_info(o.fp8).code_dtype; }

// The format of a codes tensor of case c, from its dtype.
fp8::FormatId format_of_codes(const Case& c, const Tensor& t) {
  if (const auto f = fp8::format_of_dtype(t.dtype)) return *f;
  throw CaseError(c.origin + ": tensor '" + t.name + "' has dtype " + std::string(dtype_name(t.dtype)) +
                  ", not an FP8 code type (F8_E4M3 or F8_E5M2)");
}

Tensor scale_tensor(std::string name, std::vector<std::int64_t> shape, const std::vector<float>& s, bool bf16) {
  if (!bf16) return Tensor::from_f32(std::move(name), std::move(shape), s);
  std::vector<std::uint8_t> bytes(s.size() * 2);
  for (std::size_t i = 0; i < s.size(); ++i) {
    const std::uint32_t u = bits_of(s[i]) >> 16;  // exact: the value is bf16-representable
    bytes[2 * i] = static_cast<std::uint8_t>(u);
    bytes[2 * i + 1] = static_cast<std::uint8_t>(u >> 8);
  }
  return Tensor::from_bytes(std::move(name), DType::BF16, std::move(shape), bytes);
}

// codes[i] * scale[its group or tile under the format's layout]
std::vector<float> dequant_groups(const Case& c, const char* codes, const char* scale) {
  const Tensor& t = c.require(codes);
  const Tensor& s = c.require(scale);
  const BlockMap blocks = block_map(c, codes);
  if (s.element_count() != blocks.blocks)
    throw CaseError(c.origin + ": tensor '" + scale + "' has " + std::to_string(s.element_count()) + " elements, but '" +
                    codes + "' has " + std::to_string(blocks.blocks) + " groups (" + blocks.description + ")");
  const fp8::FormatId f = format_of_codes(c, t);
  const auto q = t.u8();
  std::vector<float> out(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) out[i] = fp8::decode(f, q[i]) * s.value_as_float(blocks.block_of(i));
  return out;
}

nlohmann::json defaults(int qb) {
  return {{"group_size", qb}, {"fp8", "e4m3"}, {"scale_dtype", "bf16"}, {"division", "ieee"}, {"casts", "gpu"}};
}

const char* kProvenance = "NVlabs/COAT 80ec99f coat/activation/real_quantization/";

// The group sizes COAT builds its quantize kernels for (_quantize.py: QB in [16, 32, 64, 128]): the
// battery runs the smallest and the largest besides a format's default (per tensor takes 16 only).
constexpr std::size_t kSmallestGroup = 16, kLargestGroup = 128;

// The battery's other parameter value (FormatSpec::battery_params): E5M2 codes under the GPU's casts,
// COAT's format for gradients (its golden cases of E5M2 carry the interpreter's casts, so nothing
// else holds a kernel's GPU E5M2 cast to the reference: a cast through f16 would pass).
std::vector<nlohmann::json> e5m2_runs() { return {{{"fp8", "e5m2"}}}; }

// The schema's pieces: a 2-D input, FP8 codes (E4M3 or E5M2 by the fp8 parameter) of its shape or
// its transpose's, and a scale (bf16 or float32 by scale_dtype) with one entry per group or tile.
TensorSpec matrix_input() { return {"input", {.dtypes = {DType::F32, DType::BF16}, .shape = any_shape(2)}}; }
Schema codes_like(ShapeRule shape) { return {.dtypes = {DType::F8_E4M3, DType::F8_E5M2}, .shape = std::move(shape)}; }
Schema scale_of(const std::string& codes) { return {.dtypes = {DType::BF16, DType::F32}, .shape = entry_per_block_of(codes)}; }

// Why a code of `codes` or `codes_t` differs. Its group's fp32 scale S is recomputed from the input
// (the reference's NaN-ignoring absmax and group_scale over the code's group or tile; per tensor the
// stored scale, which the codes divide by); then: where x / S gives the expected code and the other
// arithmetic (x * (1 / S) for IEEE division, x / S for div-full) the actual one, that arithmetic
// variant; neighbouring codes, a tie or a near-boundary of x / S; else genuine. Each with the input,
// x / S and S.
ElementExplainer act_code_explainer(const Case& e, const Case& a, const std::string& tensor) {
  if (tensor != "codes" && tensor != "codes_t") return {};
  const Tensor* want = e.find(tensor);
  const Tensor* got = a.find(tensor);
  const Tensor* input = e.find("input");
  if (!want || !got || !input || want->dtype != got->dtype || want->bytes.size() != got->bytes.size() ||
      input->shape.size() != 2 || input->element_count() != want->bytes.size())
    return {};
  const auto f = fp8::format_of_dtype(want->dtype);
  if (!f) return {};
  // The case's params as its format's run reads them (the per-tensor format fixes scale_dtype itself);
  // params the run would refuse leave the codes unexplained rather than stop the comparison.
  Options o;
  try {
    nlohmann::json p = resolve_params(*find_format(e.format()), e.params());
    if (!p.contains("scale_dtype")) p["scale_dtype"] = "bf16";
    o = options_from(p);
  } catch (const std::exception&) {
    return {};
  }
  o.fp8 = *f;
  const std::int64_t m = input->shape[0], n = input->shape[1];
  const bool transposed = tensor == "codes_t";  // N x M: element i is x[i % M][i / M]
  auto x_of = [input, m, n, transposed](std::size_t i) {
    return input->value_as_float(transposed ? (i % m) * n + i / m : i);
  };
  const BlockMap groups = block_map(e, tensor);
  std::vector<float> s(groups.blocks, std::numeric_limits<float>::quiet_NaN());
  if (e.format() == "coat.act.pertensor.groupscale") {
    std::fill(s.begin(), s.end(), e.require("scale").value_as_float(0));
  } else {
    for (std::size_t i = 0; i < want->bytes.size(); ++i) s[groups.block_of(i)] = absmax_step(s[groups.block_of(i)], x_of(i));
    for (float& v : s) v = group_scale(v, o);
  }
  return [want, got, x_of, groups, s = std::move(s), o](std::size_t i) -> Explanation {
    Explanation why;
    const float x = x_of(i), scale = s[groups.block_of(i)];
    const float y = div(x, scale, o.division);
    why.input = x;
    why.scale = scale;
    why.scaled = y;
    const std::uint8_t ce = want->bytes[i], ca = got->bytes[i];
    const float ve = fp8::decode(o.fp8, ce), va = fp8::decode(o.fp8, ca);
    if (!std::isfinite(scale) || scale == 0.0f || std::isnan(ve) || std::isnan(va)) return why;
    const bool ieee = o.division == Division::Ieee;
    const float other = ieee ? x * (1.0f / scale) : x / scale;
    if (cast_fp8(y, o.fp8, o.casts) == ce && cast_fp8(other, o.fp8, o.casts) == ca) {
      why.cls = MismatchClass::ArithmeticVariant;
      why.variant = ieee ? "reciprocal" : "division";
    } else if (std::abs(fp8::code_ordinal(ce) - fp8::code_ordinal(ca)) == 1) {
      Explanation near = explain_neighbours(y, std::min(ve, va), std::max(ve, va));
      near.input = why.input;
      near.scale = why.scale;
      return near;
    }
    return why;
  };
}

// Generated inputs (input_shape.hpp): whole tiles of the kernel's shape rule for the params, the
// reference's own checks (coat_activation.cpp) in words: rows_per_qb QB x cols_per_qb QB.
InputTile group_tile(const nlohmann::json& p, std::int64_t rows_per_qb, std::int64_t cols_per_qb) {
  const auto qb = static_cast<std::int64_t>(positive_size_param(p, "group_size"));
  const std::string g = " (group_size " + std::to_string(qb) + ")";
  return {rows_per_qb * qb, cols_per_qb * qb,
          "M % " + std::to_string(rows_per_qb * qb) + " == 0 and N % " + std::to_string(cols_per_qb * qb) + " == 0" + g};
}

// The E4M3 or E5M2 grid's thresholds in blocks led by an absmax of 1: S = RN((1 + 1e-10f) / fp8_max) =
// RN(1 / fp8_max), not a power of two, so that x / S and x * (1 / S) disagree near some thresholds.
// A block is a group (1 x QB: a shaped input's rows are whole groups) or, per block, a QB x QB tile
// (one tile wide, a tile is QB * QB consecutive values), so that scaled-edges' scales are the tiles'.
std::vector<float> group_edges(const nlohmann::json& p, bool tiles) {
  const std::size_t qb = positive_size_param(p, "group_size");
  return codebook_edges(fp8_grid_over_absmax(fp8::format_from_param(p.at("fp8").get<std::string>(), "fp8")),
                        tiles ? qb * qb : qb);
}

}  // namespace

void register_coat_activation_formats(std::vector<FormatSpec>& out) {
  {
    FormatSpec f;
    f.name = "coat.act.pergroup";
    f.description = "COAT per-group 1xQB FP8 activation quantization: codes from the fp32 scale S, stored scale bf16(S) or S";
    f.provenance = std::string(kProvenance) + "_quantize.py fp8_quantize";
    f.default_params = defaults(16);
    f.inputs = {matrix_input()};
    f.outputs = {{"codes", row_groups(param_extent("group_size"), {"scale"}), codes_like(same_shape("input"))},
                 {"scale", block_entries(), scale_of("codes")}};
    f.run = [](const Case& in, const nlohmann::json& p, int /*threads*/) {
      const Options o = options_from(p);
      const Input2d x = input_2d(in);
      const Quantized q = quantize_pergroup(x.x, x.m, x.n, o);
      return std::vector<Tensor>{
          Tensor::from_bytes("codes", code_dtype(o), {x.m, x.n}, q.codes),
          scale_tensor("scale", {x.m, x.n / o.group_size}, q.scale, o.scale_dtype == ScaleDtype::BF16)};
    };
    f.dequantize_reads = {"codes", "scale"};
    f.dequantize = [](const Case& c, const nlohmann::json&) { return dequant_groups(c, "codes", "scale"); };
    f.input_tile = [](const nlohmann::json& p) { return group_tile(p, 2, 4); };  // M % 2QB, N % 4QB
    f.battery_block_sizes = {kLargestGroup};
    f.explain = act_code_explainer;
    f.edge_inputs = [](const nlohmann::json& p) { return group_edges(p, false); };
    f.battery_params = e5m2_runs();
    out.push_back(std::move(f));
  }
  {
    FormatSpec f;
    f.name = "coat.act.pertensor.groupscale";
    f.description = "COAT per-tensor FP8 quantization whose scale is the max of bf16 per-group (1x16) scales";
    f.provenance = std::string(kProvenance) + "_quantize_pertensor.py fp8_quantize_pertensor + _division.py fp8_division";
    f.default_params = defaults(16);
    f.default_params.erase("scale_dtype");
    f.inputs = {matrix_input()};
    // every code is scaled by the one per-tensor scale; group_scale holds one entry per 1x16 group of the
    // input (read by nothing but the comparison, which holds its shape to the reference's)
    f.outputs = {{"codes", per_tensor({"scale"}), codes_like(same_shape("input"))},
                 {"scale", block_entries(), {.dtypes = {DType::BF16}, .shape = scalar()}},
                 {"group_scale", block_entries(), {.dtypes = {DType::BF16}, .shape = any_shape(2)}}};
    f.run = [](const Case& in, const nlohmann::json& params, int /*threads*/) {
      nlohmann::json p = params;
      p["scale_dtype"] = "bf16";
      const Options o = options_from(p);
      const Input2d x = input_2d(in);
      const PerTensor q = quantize_pertensor_groupscale(x.x, x.m, x.n, o);
      return std::vector<Tensor>{Tensor::from_bytes("codes", code_dtype(o), {x.m, x.n}, q.codes),
                                 scale_tensor("scale", {1}, {q.scale}, true),
                                 scale_tensor("group_scale", {x.m, x.n / 16}, q.group_scale, true)};
    };
    f.dequantize_reads = {"codes", "scale"};
    f.dequantize = [](const Case& c, const nlohmann::json&) {
      const Tensor& t = c.require("codes");
      const fp8::FormatId f = format_of_codes(c, t);
      const float s = c.require("scale").value_as_float(0);
      const auto q = t.u8();
      std::vector<float> v(q.size());
      for (std::size_t i = 0; i < q.size(); ++i) v[i] = fp8::decode(f, q[i]) * s;
      return v;
    };
    f.input_tile = [](const nlohmann::json&) { return InputTile{32, 64, "M % 32 == 0 and N % 64 == 0 (group_size 16)"}; };
    f.explain = act_code_explainer;
    f.edge_inputs = [](const nlohmann::json& p) { return group_edges(p, false); };
    f.battery_params = e5m2_runs();
    out.push_back(std::move(f));
  }
  {
    FormatSpec f;
    f.name = "coat.act.pergroup.transposed";
    f.description = "COAT per-group 1xQB quantization of x and, with its own groups along M, of x^T (y_t != y^T)";
    f.provenance = std::string(kProvenance) + "_quantize_transpose.py fp8_quantize_transpose";
    f.default_params = defaults(16);
    f.inputs = {matrix_input()};
    // codes_t is stored N x M: its 1xQB row groups run along x's columns (M), one scale_t entry each
    f.outputs = {{"codes", row_groups(param_extent("group_size"), {"scale"}), codes_like(same_shape("input"))},
                 {"scale", block_entries(), scale_of("codes")},
                 {"codes_t", row_groups(param_extent("group_size"), {"scale_t"}), codes_like(transposed_of("input"))},
                 {"scale_t", block_entries(), scale_of("codes_t")}};
    f.run = [](const Case& in, const nlohmann::json& p, int /*threads*/) {
      const Options o = options_from(p);
      const Input2d x = input_2d(in);
      const Transposed t = quantize_pergroup_transposed(x.x, x.m, x.n, o);
      const bool bf16 = o.scale_dtype == ScaleDtype::BF16;
      return std::vector<Tensor>{Tensor::from_bytes("codes", code_dtype(o), {x.m, x.n}, t.rows.codes),
                                 scale_tensor("scale", {x.m, x.n / o.group_size}, t.rows.scale, bf16),
                                 Tensor::from_bytes("codes_t", code_dtype(o), {x.n, x.m}, t.transposed.codes),
                                 scale_tensor("scale_t", {x.n, x.m / o.group_size}, t.transposed.scale, bf16)};
    };
    f.dequantize_reads = {"codes", "scale"};
    f.dequantize = [](const Case& c, const nlohmann::json&) { return dequant_groups(c, "codes", "scale"); };
    f.input_tile = [](const nlohmann::json& p) { return group_tile(p, 1, 1); };  // M, N multiples of QB
    f.battery_block_sizes = {kLargestGroup};
    f.explain = act_code_explainer;
    f.edge_inputs = [](const nlohmann::json& p) { return group_edges(p, false); };
    f.battery_params = e5m2_runs();
    out.push_back(std::move(f));
  }
  {
    FormatSpec f;
    f.name = "coat.act.perblock";
    f.description = "COAT per-block QBxQB FP8 quantization (DeepSeek path), scale in scale_dtype";
    f.provenance = std::string(kProvenance) + "_quantize_perblock.py fp8_quantize_perblock";
    f.default_params = defaults(128);
    f.inputs = {matrix_input()};
    f.outputs = {{"codes", tiles(param_extent("group_size"), param_extent("group_size"), {"scale"}),
                  codes_like(same_shape("input"))},
                 {"scale", block_entries(), scale_of("codes")}};
    f.run = [](const Case& in, const nlohmann::json& p, int /*threads*/) {
      const Options o = options_from(p);
      const Input2d x = input_2d(in);
      const Quantized q = quantize_perblock(x.x, x.m, x.n, o);
      return std::vector<Tensor>{
          Tensor::from_bytes("codes", code_dtype(o), {x.m, x.n}, q.codes),
          scale_tensor("scale", {x.m / o.group_size, x.n / o.group_size}, q.scale, o.scale_dtype == ScaleDtype::BF16)};
    };
    f.dequantize_reads = {"codes", "scale"};
    f.dequantize = [](const Case& c, const nlohmann::json&) { return dequant_groups(c, "codes", "scale"); };
    f.input_tile = [](const nlohmann::json& p) { return group_tile(p, 1, 1); };  // QB x QB tiles
    f.battery_block_sizes = {kSmallestGroup};
    f.explain = act_code_explainer;
    f.edge_inputs = [](const nlohmann::json& p) { return group_edges(p, true); };
    f.battery_params = e5m2_runs();
    out.push_back(std::move(f));
  }
}

}  // namespace lowbit
