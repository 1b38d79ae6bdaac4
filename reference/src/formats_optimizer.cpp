// Registry entries of the fused optimizer steps: torchao Adam/AdamW on 8-bit, 4-bit and FP8 states,
// and bitsandbytes' 8-bit block-wise Adam as its CPU kernel computes it.
// A case holds the state before the step (param, grad, step, lr, exp_avg.*, exp_avg_sq.*) and the
// state after it (the same names with ".next").
#include <stdexcept>

#include "lowbit/blockwise.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/optimizer.hpp"

namespace lowbit {

namespace {

std::vector<std::int64_t> flat(std::size_t n) { return {static_cast<std::int64_t>(n)}; }

optimizer::Moment read_moment(const Case& in, const std::string& prefix, bool fp8) {
  optimizer::Moment m;
  m.codes = in.require(prefix + ".codes").u8();
  m.scale = in.require(prefix + ".scale").f32();
  if (!fp8) m.qmap = in.require(prefix + ".qmap").f32();
  return m;
}

void write_moment(std::vector<Tensor>& out, const std::string& prefix, const optimizer::Moment& m, bool fp8) {
  out.push_back(Tensor::from_bytes(prefix + ".codes.next", fp8 ? DType::F8_E4M3 : DType::U8, flat(m.codes.size()), m.codes));
  out.push_back(Tensor::from_f32(prefix + ".scale.next", flat(m.scale.size()), m.scale));
}

float scalar(const Case& in, const std::string& name) {
  const std::vector<float> v = in.require(name).f32();
  if (v.size() != 1) throw CaseError(in.origin + ": tensor '" + name + "' must hold one value");
  return v[0];
}

optimizer::AdamHyper hyper_from(const Case& in, const nlohmann::json& p) {
  optimizer::AdamHyper h;
  h.lr = scalar(in, "lr");
  h.beta1 = p.at("beta1").get<double>();
  h.beta2 = p.at("beta2").get<double>();
  h.eps = p.at("eps").get<double>();
  h.weight_decay = p.at("weight_decay").get<double>();
  h.adamw = p.at("adamw").get<bool>();
  return h;
}

// A differing new parameter is a library rounding when both the expected and the actual bits are
// values the reference computes with torch's CPU sqrt (MKL, not correctly rounded) taken as the
// correctly rounded root or one ulp off it, for sqrt(v) or sqrt(bc2) or both: then the two sides
// differ only in how that one operation rounded.
bool both_reproduced(std::uint64_t expected_bits, std::uint64_t actual_bits, const std::vector<float>& candidates) {
  auto reproduced = [&](std::uint64_t bits) {
    for (float c : candidates)
      if (bits_of(c) == bits) return true;
    return false;
  };
  return reproduced(expected_bits) && reproduced(actual_bits);
}

Explanation explain_param(const Case& expected, const Case& actual, const std::string& tensor, std::size_t i, bool fp8) {
  const Tensor* got = actual.find("param.next");
  if (tensor != "param.next" || !got || got->dtype != DType::F32 || i >= got->element_count()) return {};
  const nlohmann::json p = resolve_params(*find_format(expected.format()), expected.params());
  const auto block = p.at("block_size").get<std::size_t>();
  const auto kind = fp8 ? optimizer::TorchaoState::Fp8 : optimizer::TorchaoState::Codebook;
  const float m_old = optimizer::dequantize(read_moment(expected, "exp_avg", fp8), kind, block)[i];
  const float v_old = optimizer::dequantize(read_moment(expected, "exp_avg_sq", fp8), kind, block)[i];
  const optimizer::AdamHyper h = hyper_from(expected, p);
  const float step = scalar(expected, "step") + 1.0f;
  const float param = expected.require("param").value_as_float(i), grad = expected.require("grad").value_as_float(i);
  std::vector<float> candidates;
  for (int sqrt_bc2 = -1; sqrt_bc2 <= 1; ++sqrt_bc2) {
    const auto s = optimizer::torchao_adam_scalars(h, step, sqrt_bc2);
    for (int sqrt_v = -1; sqrt_v <= 1; ++sqrt_v)
      candidates.push_back(optimizer::torchao_adam_element(param, grad, m_old, v_old, s, sqrt_v).param);
  }
  if (both_reproduced(expected.require("param.next").bits_at(i), got->bits_at(i), candidates))
    return {MismatchClass::LibraryRounding, 0};
  return {};
}

FormatSpec torchao_adam_format(const std::string& variant, bool fp8, std::size_t default_block) {
  FormatSpec f;
  f.name = "torchao.adam." + variant;
  f.description = "one torchao Adam/AdamW step (eager semantics) on " + variant +
                  " states: lerp as a fused multiply-add, float32 powf bias corrections, the unquantized moments "
                  "update the parameter, then the moments are requantized";
  f.provenance = "torchao 0.18 optim/adam.py single_param_adam (eager), on optim/subclass_" +
                 std::string(fp8 ? "fp8.py OptimStateFp8" : variant == "codebook8" ? "8bit.py OptimState8bit"
                                                                                    : "4bit.py OptimState4bit");
  f.default_params = {{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.0}, {"adamw", true},
                      {"block_size", default_block}};
  if (fp8) {
    f.default_params["overflow"] = "satfinite";
    f.default_params["nan_encoding"] = "torch";
    f.default_params["nan_widening"] = "c10";
  }
  // torch's CPU sqrt is not correctly rounded (MKL): the new parameter may differ by a proven library rounding
  f.default_tolerance = "torch-cpu-eager";
  f.inputs = {"param", "grad", "step", "lr", "exp_avg.codes", "exp_avg.scale", "exp_avg_sq.codes", "exp_avg_sq.scale"};
  if (!fp8) {
    f.inputs.push_back("exp_avg.qmap");
    f.inputs.push_back("exp_avg_sq.qmap");
  }
  f.outputs = {"param.next", "step.next", "exp_avg.codes.next", "exp_avg.scale.next", "exp_avg_sq.codes.next",
               "exp_avg_sq.scale.next"};
  f.run = [fp8](const Case& in, const nlohmann::json& p) {
    const optimizer::AdamHyper h = hyper_from(in, p);
    const auto block = p.at("block_size").get<std::size_t>();
    fp8::Policy policy = fp8::torch_eager<fp8::E4M3FN>();
    if (fp8) {
      const auto overflow = fp8::parse_overflow(p.at("overflow").get<std::string>());
      const auto nan = fp8::parse_nan_encoding(p.at("nan_encoding").get<std::string>(), fp8::FormatId::E4M3FN);
      if (!overflow || !nan) throw std::runtime_error("bad overflow or nan_encoding parameter");
      policy = {*overflow, *nan};
    }
    std::vector<float> param = in.require("param").f32();
    const std::vector<float> grad = in.require("grad").f32();
    float step = scalar(in, "step");
    optimizer::Moment m = read_moment(in, "exp_avg", fp8), v = read_moment(in, "exp_avg_sq", fp8);
    optimizer::torchao_adam_step(param, grad, step, m, v, h,
                                 fp8 ? optimizer::TorchaoState::Fp8 : optimizer::TorchaoState::Codebook, block, policy);
    std::vector<Tensor> out = {Tensor::from_f32("param.next", in.require("param").shape, param),
                               Tensor::from_f32("step.next", {}, std::vector<float>{step})};
    write_moment(out, "exp_avg", m, fp8);
    write_moment(out, "exp_avg_sq", v, fp8);
    return out;
  };
  f.explain = [fp8](const Case& e, const Case& a, const std::string& tensor, std::size_t i) {
    return explain_param(e, a, tensor, i, fp8);
  };
  return f;
}

// ---- bitsandbytes CPU 8-bit Adam ----------------------------------------------------------------

optimizer::BnbAdamHyper bnb_hyper_from(const nlohmann::json& p) {
  optimizer::BnbAdamHyper h;
  h.lr = p.at("lr").get<double>();
  h.beta1 = p.at("beta1").get<double>();
  h.beta2 = p.at("beta2").get<double>();
  h.eps = p.at("eps").get<double>();
  h.weight_decay = p.at("weight_decay").get<double>();
  return h;
}

std::int64_t step_of(const Case& in) {
  const std::vector<std::int64_t> v = in.require("step").i64();
  if (v.size() != 1) throw CaseError(in.origin + ": tensor 'step' must hold one value");
  return v[0];
}

Explanation explain_bnb_param(const Case& expected, const Case& actual, const std::string& tensor, std::size_t i) {
  const Tensor* got = actual.find("param.next");
  if (tensor != "param.next" || !got || got->dtype != DType::F32 || i >= got->element_count()) return {};
  const nlohmann::json p = resolve_params(*find_format(expected.format()), expected.params());
  const auto block = p.at("block_size").get<std::size_t>();
  const optimizer::Moment m = read_moment(expected, "exp_avg", false), v = read_moment(expected, "exp_avg_sq", false);
  const float m_old = blockwise::bnb_dequantize(m.codes, m.scale, m.qmap, block)[i];
  const float v_old = blockwise::bnb_dequantize(v.codes, v.scale, v.qmap, block)[i];
  const auto s = optimizer::bnb_adam_scalars(bnb_hyper_from(p), step_of(expected));
  const float param = expected.require("param").value_as_float(i), grad = expected.require("grad").value_as_float(i);
  std::vector<float> candidates;
  for (int sqrt_v = -1; sqrt_v <= 1; ++sqrt_v)
    candidates.push_back(optimizer::bnb_adam_cpu_element(param, grad, m_old, v_old, s, sqrt_v).param);
  if (both_reproduced(expected.require("param.next").bits_at(i), got->bits_at(i), candidates))
    return {MismatchClass::LibraryRounding, 0};
  return {};
}

FormatSpec bnb_adam_cpu_format() {
  FormatSpec f;
  f.name = "bnb.adam8bit.cpu";
  f.description = "one bitsandbytes 8-bit block-wise Adam/AdamW step as its CPU kernel computes it: dequantize, "
                  "moments with ATen's fused add/addcmul, decoupled weight decay before the update, requantize with "
                  "the CPU lookup table (block 256, partial tail)";
  f.provenance = "bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu (optimizer 'adam')";
  f.default_params = {{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.0}, {"lr", 1e-3},
                      {"block_size", 256}};
  f.default_tolerance = "torch-cpu-eager";
  f.inputs = {"param", "grad", "step", "exp_avg.codes", "exp_avg.scale", "exp_avg.qmap", "exp_avg_sq.codes",
              "exp_avg_sq.scale", "exp_avg_sq.qmap"};
  f.outputs = {"param.next", "exp_avg.codes.next", "exp_avg.scale.next", "exp_avg_sq.codes.next", "exp_avg_sq.scale.next"};
  f.run = [](const Case& in, const nlohmann::json& p) {
    std::vector<float> param = in.require("param").f32();
    optimizer::Moment m = read_moment(in, "exp_avg", false), v = read_moment(in, "exp_avg_sq", false);
    optimizer::bnb_adam_cpu_step(param, in.require("grad").f32(), step_of(in), m, v, bnb_hyper_from(p),
                                 p.at("block_size").get<std::size_t>());
    std::vector<Tensor> out = {Tensor::from_f32("param.next", in.require("param").shape, param)};
    write_moment(out, "exp_avg", m, false);
    write_moment(out, "exp_avg_sq", v, false);
    return out;
  };
  f.explain = explain_bnb_param;
  return f;
}

}  // namespace

void register_optimizer_formats(std::vector<FormatSpec>& out) {
  out.push_back(torchao_adam_format("codebook8", false, 256));
  out.push_back(torchao_adam_format("codebook4", false, 128));
  out.push_back(torchao_adam_format("fp8", true, 256));
  out.push_back(bnb_adam_cpu_format());
}

}  // namespace lowbit
