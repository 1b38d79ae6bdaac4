// Registry entries of COAT's FP8 AdamW kernels, with and without Dynamic Range Expansion. A case
// holds the state before the launch (param, grad, step — the int the optimizer passes — and
// exp_avg.*, exp_avg_sq.*: codes, scale, and with expansion expand (k) and centre (c), one per
// group of 128) and after it (the same names with ".next"). The audit's round trip is one moment's
// store and load: exp_avg_sq's path for a non-negative tensor, exp_avg's otherwise.
#include <algorithm>
#include <stdexcept>

#include "coat_optimizer_edges.hpp"
#include "coat_optimizer_run.hpp"
#include "lowbit/coat_optimizer.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/fp8.hpp"

namespace lowbit {

namespace {

std::vector<std::int64_t> flat(std::size_t n) { return {static_cast<std::int64_t>(n)}; }

const char* const kMoments[] = {"exp_avg", "exp_avg_sq"};

std::vector<std::string> group_tensors(bool expansion) {
  if (expansion) return {"scale", "expand", "centre"};
  return {"scale"};
}

coat::Moment read_moment(const Case& in, const std::string& prefix, bool expansion) {
  coat::Moment m;
  m.codes = in.require(prefix + ".codes").u8();
  m.scale = in.require(prefix + ".scale").f32();
  if (expansion) {
    m.expand = in.require(prefix + ".expand").f32();
    m.centre = in.require(prefix + ".centre").f32();
  }
  return m;
}

void write_moment(std::vector<Tensor>& out, const std::string& prefix, const coat::Moment& m, bool expansion,
                  const std::string& suffix) {
  out.push_back(Tensor::from_bytes(prefix + ".codes" + suffix, fp8::E4M3FN::code_dtype, flat(m.codes.size()), m.codes));
  out.push_back(Tensor::from_f32(prefix + ".scale" + suffix, flat(m.scale.size()), m.scale));
  if (expansion) {
    out.push_back(Tensor::from_f32(prefix + ".expand" + suffix, flat(m.expand.size()), m.expand));
    out.push_back(Tensor::from_f32(prefix + ".centre" + suffix, flat(m.centre.size()), m.centre));
  }
}

coat::Hyper hyper_from(const nlohmann::json& p, bool expansion) {
  coat::Hyper h;  // pybind11 rounds each Python float to float32 once
  h.lr = static_cast<float>(p.at("lr").get<double>());
  h.beta1 = static_cast<float>(p.at("beta1").get<double>());
  h.beta2 = static_cast<float>(p.at("beta2").get<double>());
  h.eps = static_cast<float>(p.at("eps").get<double>());
  h.weight_decay = static_cast<float>(p.at("weight_decay").get<double>());
  if (expansion) h.expand_min = static_cast<int>(positive_size_param(p, "expand_min"));
  return h;
}

int step_of(const Case& in) {
  const std::vector<std::int64_t> v = in.require("step").i64();
  // the optimizer's float32 counter stops at 2^24; the kernel takes an int
  if (v.size() != 1 || v[0] < 1 || v[0] > (std::int64_t{1} << 24))
    throw CaseError(in.origin + ": tensor 'step' must hold one value in [1, 2^24]");
  return static_cast<int>(v[0]);
}

FormatSpec coat_adamw_format(bool expansion) {
  FormatSpec f;
  f.name = expansion ? "coat.optim.expand.e4m3" : "coat.optim.origin.e4m3";
  f.description = std::string("one COAT FP8 AdamW launch ") +
                  (expansion ? "with Dynamic Range Expansion (per group of 128: k floored to 1/expand_min, centre "
                               "sqrt(max) sqrt(min), the kernel's zero-skipping min tree capped at 1e9)"
                             : "without expansion (per group of 128: scale (max + 1e-20) / 448)") +
                  "; E4M3 states, libdevice powf and log2f emulated, fused multiply-adds where nvcc/ptxas put them";
  f.provenance = std::string("COAT 80ec99f coat/optimizer/kernels/") +
                 (expansion ? "fp8_adamw_expand_cuda_kernel.cu" : "fp8_adamw_cuda_kernel.cu") +
                 " (nvcc 13.0 PTX, sm_90)";
  f.default_params = {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 1e-2}};
  if (expansion) f.default_params["expand_min"] = 16;
  const Schema f32_like_param = {.dtypes = {DType::F32}, .shape = same_shape("param")};
  f.inputs = {{"param", {.dtypes = {DType::F32}}}, {"grad", f32_like_param}, {"step", {.dtypes = {DType::I64}, .shape = scalar()}}};
  f.outputs = {{"param.next", f32_like_param}};
  // each moment's codes lie in groups of 128 (the last one partial), with one entry per group in
  // each of the moment's statistics; a differing statistic explains its group's codes
  for (const std::string suffix : {"", ".next"}) {
    auto& list = suffix.empty() ? f.inputs : f.outputs;
    for (const std::string moment : kMoments) {
      const std::string codes = moment + ".codes" + suffix;
      std::vector<std::string> stats;
      for (const std::string& t : group_tensors(expansion)) stats.push_back(moment + "." + t + suffix);
      list.push_back({codes, blocks(elements(coat::kGroup), stats),
                      {.dtypes = {fp8::E4M3FN::code_dtype}, .shape = same_count("param")}});
      for (const std::string& t : stats)
        list.push_back({t, block_entries(), {.dtypes = {DType::F32}, .shape = entry_per_block_of(codes)}});
    }
  }
  f.run = [expansion](const Case& in, const nlohmann::json& p, int /*threads*/) { return run_coat_adamw(in, p, expansion); };
  // CoatAdamW's first step: codes 0x00, scale 0, k and c 1 (fp8_adamw.py); step 1
  f.fresh_state = [expansion](std::span<const float> param, const nlohmann::json&) {
    Case c;
    c.add(Tensor::from_f32("param", flat(param.size()), param));
    c.add(Tensor::from_f32("grad", flat(param.size()), std::vector<float>(param.size(), 0.0f)));
    c.add(Tensor::from_i64("step", {}, std::vector<std::int64_t>{1}));
    std::vector<Tensor> states;
    for (const char* moment : kMoments) write_moment(states, moment, coat::fresh_moment(param.size(), expansion), expansion, "");
    for (Tensor& t : states) c.add(std::move(t));
    return c;
  };
  f.round_trip = [expansion, expand_min = f.default_params.value("expand_min", 16)](
                     std::span<const float> x, std::size_t, bool tensor_has_negative, std::span<float> out) {
    const bool second = !tensor_has_negative;  // the kernel's second-moment path (exp_avg_sq) for non-negative data
    for (std::size_t start = 0; start < x.size(); start += coat::kGroup) {
      const auto group = x.subspan(start, std::min(coat::kGroup, x.size() - start));
      const coat::QuantizedGroup g =
          expansion ? coat::expand_quantize_group(group, expand_min, second) : coat::origin_quantize_group(group);
      for (std::size_t i = 0; i < group.size(); ++i)
        out[start + i] = expansion ? coat::expand_dequantize(g.codes[i], g.scale, g.expand, g.centre, second)
                                   : coat::origin_dequantize(g.codes[i], g.scale);
    }
  };
  // the battery's `edges` run: the groups random gradients never make (zeros, one magnitude, the 1e9
  // cap, a k boundary) and a partial last group
  f.edge_inputs = [](const nlohmann::json&) { return coat_optimizer_edges(); };
  f.round_trip_blocks = {coat::kGroup, coat::kGroup, false, "n/a (COAT groups are 128)"};
  // one moment's state (exp_avg's and exp_avg_sq's are declared alike)
  f.round_trip_stores = {"exp_avg.codes"};
  for (const std::string& t : group_tensors(expansion)) f.round_trip_stores.push_back("exp_avg." + t);
  return f;
}

}  // namespace

std::vector<Tensor> run_coat_adamw(const Case& in, const nlohmann::json& p, bool expansion, const coat::ExpandRule& rule) {
  std::vector<float> param = in.require("param").f32();
  coat::Moment m = read_moment(in, "exp_avg", expansion), v = read_moment(in, "exp_avg_sq", expansion);
  coat::adamw_step(param, in.require("grad").f32(), step_of(in), m, v, hyper_from(p, expansion), expansion, rule);
  std::vector<Tensor> out = {Tensor::from_f32("param.next", in.require("param").shape, param)};
  write_moment(out, "exp_avg", m, expansion, ".next");
  write_moment(out, "exp_avg_sq", v, expansion, ".next");
  return out;
}

void register_coat_optimizer_formats(std::vector<FormatSpec>& out) {
  out.push_back(coat_adamw_format(false));
  out.push_back(coat_adamw_format(true));
}

}  // namespace lowbit
