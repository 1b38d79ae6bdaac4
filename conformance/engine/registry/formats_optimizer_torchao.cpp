// Registry entries of torchao's Adam/AdamW step: on 8-bit, 4-bit and FP8 states, and on the dense
// states torchao keeps for small tensors. A case holds the state before the step (param, grad, step,
// lr, the moments) and after it (the same names with ".next"). Param `lr` is the value a fresh
// state's lr tensor starts with (golden generate); the step reads the tensor. Params `amsgrad` and
// `bf16_stochastic_round` add the max_exp_avg_sq moment and the sr_random draws (int32, one per
// element). The parameter, grad and dense states are F32 or BF16, as torch held them.
#include <cmath>
#include <stdexcept>

#include "formats_optimizer_io.hpp"
#include "lowbit/bf16_round.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/optimizer.hpp"

namespace lowbit {

namespace {

using optimizer::TorchaoState;
using namespace optimizer_io;

const char* const kMoments[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};

optimizer::TorchaoAdamOptions options_from(const Case& in, const nlohmann::json& p, TorchaoState kind) {
  optimizer::TorchaoAdamOptions o;
  o.kind = kind;
  if (kind != TorchaoState::Dense) o.block_size = positive_size_param(p, "block_size");
  if (kind == TorchaoState::Fp8) {
    const auto overflow = fp8::parse_overflow(p.at("overflow").get<std::string>());
    const auto nan = fp8::parse_nan_encoding(p.at("nan_encoding").get<std::string>(), fp8::FormatId::E4M3FN);
    if (!overflow || !nan) throw std::runtime_error("bad overflow or nan_encoding parameter");
    o.fp8_policy = {*overflow, *nan};
  }
  if (p.at("amsgrad").get<bool>() && kind != TorchaoState::Dense)
    throw std::runtime_error("amsgrad on quantized states has no official behaviour to reproduce: torchao 0.18 raises "
                             "NotImplementedError there (aten.maximum on its state subclass); only dense states run it");
  const Tensor& param = in.require("param");
  if (param.dtype != DType::F32 && param.dtype != DType::BF16)
    throw CaseError(in.origin + ": tensor 'param' must be F32 or BF16");
  o.param_dtype = param.dtype == DType::BF16 ? optimizer::ParamDtype::BFloat16 : optimizer::ParamDtype::Float32;
  o.vectorized_copies = optimizer_io::fused_on(p);  // the capability: vectorized kernels fuse and copy alike
  return o;
}

optimizer::Moment read_state(const Case& in, const std::string& name, TorchaoState kind) {
  if (kind != TorchaoState::Dense) return read_moment(in, name, kind == TorchaoState::Fp8);
  optimizer::Moment m;
  m.values = widened(in.require(name));
  return m;
}

void write_state(std::vector<Tensor>& out, const Case& in, const std::string& name, const optimizer::Moment& m,
                 TorchaoState kind) {
  if (kind == TorchaoState::Dense) out.push_back(narrowed(name + ".next", in.require(name), m.values));
  else write_moment(out, name, m, kind == TorchaoState::Fp8);
}

// A moment's tensors before the step (suffix "") or after it (".next"): a quantized moment's codes lie
// in blocks of block_size, each quantized with its own entry of the moment's scale, and index the
// moment's qmap (codebook states); a dense moment is a tensor like the parameter. `required_when`:
// the parameter that asks for the moment (max_exp_avg_sq: amsgrad).
std::vector<TensorSpec> state_tensors(const std::string& name, TorchaoState kind, const std::string& suffix,
                                      const std::string& required_when, std::uint64_t qmap_entries) {
  if (kind == TorchaoState::Dense) {
    const std::string like = suffix.empty() ? "param" : name;  // the step writes the moment back in its own shape
    return {{name + suffix, {.dtypes = {DType::F32, DType::BF16}, .shape = suffix.empty() ? same_count(like) : same_shape(like),
                             .dtype_of = suffix.empty() ? "" : name, .required_when = required_when}}};
  }
  const std::string codes = name + ".codes" + suffix, scale = name + ".scale" + suffix, qmap = name + ".qmap";
  const bool codebook = kind == TorchaoState::Codebook;
  std::vector<TensorSpec> t = {
      {codes, blocks(param_extent("block_size"), {scale}),
       {.dtypes = {codebook ? DType::U8 : DType::F8_E4M3}, .shape = same_count("param"), .indexes = codebook ? qmap : "",
        .required_when = required_when}},
      {scale, block_entries(), {.dtypes = {DType::F32}, .shape = entry_per_block_of(codes), .required_when = required_when}}};
  if (codebook && suffix.empty())
    t.push_back({qmap, {.dtypes = {DType::F32}, .shape = table_of(qmap_entries), .required_when = required_when}});
  return t;
}

std::vector<std::int32_t> random_draws(const Case& in, const nlohmann::json& p) {
  return p.at("bf16_stochastic_round").get<bool>() ? in.require("sr_random").i32() : std::vector<std::int32_t>{};
}

// The arithmetic variant a kernel may use instead of torch.lerp's single rounding: the lerp written out
// as a multiply and an add (two roundings, as torch.compile's CPU code has it;
// docs/formats/torchao-adam.md), the rest of the element as torchao_adam_element has it with
// correctly rounded roots. Not a reference: the explainer's model of that kernel.
float unfused_lerp_param(float p, float g, float m_old, float v_old, const optimizer::TorchaoAdamScalars& s,
                         const float* max_old) {
  if (s.adamw) p = p - (s.lr * s.wd) * p;
  else g = g + s.wd * p;
  const float m = m_old + s.w1 * (g - m_old);
  const float v = v_old + s.w2 * (g * g - v_old);
  const float v_max = max_old ? (std::isnan(*max_old) || std::isnan(v) ? NAN : std::max(*max_old, v)) : v;
  const float denom = std::sqrt(v_max) / s.sqrt_bc2 + s.eps;
  return optimizer::torch_sub(p, (s.lr * (m / s.bc1)) / denom);
}

// A differing new parameter is first checked against the unfused lerp: where it reproduces the actual
// bits and the reference's own arithmetic does not give them, the class is arithmetic-variant
// ("unfused-fma"), never library-rounding. Otherwise it is a library rounding when both the expected
// and the actual bits are values the reference computes with torch's CPU sqrt (MKL: faithful, not
// correctly rounded) taken as the correctly rounded root or the other float bracketing the exact
// root, for sqrt(v) or sqrt(bc2) or both (a root one ulp beyond is no faithful sqrt's result).
// The states, scalars and params are read once per comparison; each element then costs 7 steps.
ElementExplainer param_explainer(const Case& expected, const Case& actual, const std::string& tensor, TorchaoState kind) {
  const Tensor* got = actual.find("param.next");
  const Tensor& want = expected.require("param.next");
  if (tensor != "param.next" || !got || got->dtype != want.dtype) return {};
  const nlohmann::json p = resolve_params(*find_format(expected.format()), expected.params());
  const optimizer::TorchaoAdamOptions o = options_from(expected, p, kind);
  const bool amsgrad = p.at("amsgrad").get<bool>();
  struct Read {
    std::vector<float> m_old, v_old, max_old;
    std::vector<std::int32_t> draws;
    std::vector<optimizer::TorchaoAdamScalars> scalars;  // sqrt(bc2) correctly rounded, then the other faithful root
    optimizer::ParamDtype param_dtype;
    bool vectorized_copies;
  };
  auto r = std::make_shared<Read>();
  r->m_old = optimizer::dequantize(read_state(expected, "exp_avg", kind), kind, o.block_size);
  r->v_old = optimizer::dequantize(read_state(expected, "exp_avg_sq", kind), kind, o.block_size);
  if (amsgrad) r->max_old = optimizer::dequantize(read_state(expected, "max_exp_avg_sq", kind), kind, o.block_size);
  r->draws = random_draws(expected, p);
  r->param_dtype = o.param_dtype;
  r->vectorized_copies = o.vectorized_copies;
  const optimizer::AdamHyper h = torchao_adam_hyper(expected, p);
  const float step = scalar(expected, "step") + 1.0f;
  // sqrt(bc2) correctly rounded first, then the other faithful root (torch's CPU sqrt, MKL): the bias
  // correction bc2 = 1 - powf(f32(beta2), step) as torchao_adam_scalars computes it
  r->scalars.push_back(optimizer::torchao_adam_scalars(h, step, 0));
  const float bc2 = 1.0f - std::pow(static_cast<float>(h.beta2), step);
  const int other_bc2 = std::sqrt(bc2) == r->scalars[0].sqrt_bc2 ? faithful_sqrt_other(bc2) : 0;
  if (other_bc2 != 0) r->scalars.push_back(optimizer::torchao_adam_scalars(h, step, other_bc2));
  const Tensor* param = &expected.require("param");
  const Tensor* grad = &expected.require("grad");
  return [r, got, want = &want, param, grad, amsgrad](std::size_t i) -> Explanation {
    if (i >= got->element_count() || i >= r->m_old.size() || i >= r->v_old.size()) return {};
    float max_old = amsgrad && i < r->max_old.size() ? r->max_old[i] : 0.0f;
    const float pv = param->value_as_float(i), gv = grad->value_as_float(i);
    auto written_bits = [&](float p32) -> std::uint64_t {
      const std::uint32_t bits = bits_of(written(p32, r->param_dtype, r->vectorized_copies, r->draws, i));
      return want->dtype == DType::BF16 ? bits >> 16 : bits;
    };
    {
      const auto& exact = r->scalars[0];  // sqrt(bc2) correctly rounded
      float max_copy = max_old;
      const float* max_in = amsgrad ? &max_copy : nullptr;
      const std::uint64_t variant = written_bits(unfused_lerp_param(pv, gv, r->m_old[i], r->v_old[i], exact, max_in));
      max_copy = max_old;
      const std::uint64_t own =
          written_bits(optimizer::torchao_adam_element(pv, gv, r->m_old[i], r->v_old[i], exact, 0, max_in).param);
      if (variant == got->bits_at(i) && variant != own) {
        return classed(MismatchClass::ArithmeticVariant, "unfused-fma");
      }
    }
    // sqrt(v) as MKL may give it: correctly rounded, or the other float bracketing the exact root
    float max_arg = max_old;
    const float root_arg =
        optimizer::torchao_adam_element(pv, gv, r->m_old[i], r->v_old[i], r->scalars[0], 0, amsgrad ? &max_arg : nullptr)
            .max_exp_avg_sq;
    const int other = faithful_sqrt_other(root_arg);
    std::vector<std::uint64_t> candidates;
    for (const auto& s : r->scalars)
      for (int sqrt_v : {0, other}) {  // (other 0: the same candidate twice)
        float max_copy = max_old;  // the step may raise it: each candidate starts from the old value
        const float p32 =
            optimizer::torchao_adam_element(pv, gv, r->m_old[i], r->v_old[i], s, sqrt_v, amsgrad ? &max_copy : nullptr).param;
        const std::uint32_t bits = bits_of(written(p32, r->param_dtype, r->vectorized_copies, r->draws, i));
        candidates.push_back(want->dtype == DType::BF16 ? bits >> 16 : bits);
      }
    if (both_reproduced(want->bits_at(i), got->bits_at(i), candidates)) return classed(MismatchClass::LibraryRounding);
    return {};
  };
}

std::string state_class(TorchaoState kind, const std::string& variant) {
  switch (kind) {
    case TorchaoState::Fp8: return "subclass_fp8.py OptimStateFp8";
    case TorchaoState::Dense: return "adam.py _new_buffer's zeros_like(p) (numel < 4096 or not a multiple of the block)";
    case TorchaoState::Codebook: break;
  }
  return variant == "codebook8" ? "subclass_8bit.py OptimState8bit" : "subclass_4bit.py OptimState4bit";
}

// torchao's _new_buffer and its subclasses' zeros(): codes 0 and scale 0 (the signed map's code 0
// dequantizes to -0.0), FP8 codes 0x00, or a dense zeros_like(param).
Case torchao_fresh_state(std::span<const float> param, const nlohmann::json& p, TorchaoState kind,
                         const std::string& variant) {
  const std::size_t n = param.size();
  Case c;
  c.add(Tensor::from_f32("param", flat(n), param));
  c.add(Tensor::from_f32("grad", flat(n), std::vector<float>(n, 0.0f)));
  c.add(Tensor::from_f32("step", {}, std::vector<float>{0.0f}));
  c.add(Tensor::from_f32("lr", {}, std::vector<float>{static_cast<float>(p.at("lr").get<double>())}));  // torch.tensor(lr)
  std::vector<std::string> moments = {"exp_avg", "exp_avg_sq"};
  if (p.at("amsgrad").get<bool>()) moments.push_back("max_exp_avg_sq");
  for (const std::string& name : moments) {
    if (kind == TorchaoState::Dense) {
      c.add(Tensor::from_f32(name, flat(n), std::vector<float>(n, 0.0f)));
      continue;
    }
    const auto block = positive_size_param(p, "block_size");
    if (n < 4096 || block == 0 || n % block != 0)
      throw std::runtime_error("torchao quantizes a state only when numel >= 4096 and a multiple of block_size (" +
                               std::to_string(n) + " elements, block " + std::to_string(block) +
                               "); torchao.adam.dense is what it uses otherwise");
    const std::vector<std::uint8_t> zeros(n, 0);
    c.add(Tensor::from_bytes(name + ".codes", kind == TorchaoState::Fp8 ? DType::F8_E4M3 : DType::U8, flat(n), zeros));
    c.add(Tensor::from_f32(name + ".scale", flat(n / block), std::vector<float>(n / block, 0.0f)));
    if (kind == TorchaoState::Codebook) {
      const bool is_signed = name == "exp_avg", four = variant == "codebook4";
      const std::vector<float> qmap = four ? (is_signed ? codebook::torchao_signed4() : codebook::torchao_unsigned4())
                                           : (is_signed ? codebook::signed8() : codebook::unsigned8());
      c.add(Tensor::from_f32(name + ".qmap", flat(qmap.size()), qmap));
    }
  }
  return c;
}

FormatSpec torchao_adam_format(const std::string& variant, TorchaoState kind, std::size_t default_block) {
  FormatSpec f;
  f.name = "torchao.adam." + variant;
  f.description = "one torchao Adam/AdamW step (eager semantics) on " + variant +
                  " states: lerp as a fused multiply-add, float32 powf bias corrections, optional AMSGrad, the "
                  "unquantized moments update the parameter (float32 or bf16, optionally stochastically rounded), "
                  "then the moments are stored";
  f.provenance = "torchao 0.18 optim/adam.py single_param_adam (eager), on optim/" + state_class(kind, variant);
  f.default_params = {{"lr", 1e-3},      {"beta1", 0.9},     {"beta2", 0.999},
                      {"eps", 1e-8},     {"weight_decay", 0.0}, {"adamw", true},
                      {"amsgrad", false}, {"bf16_stochastic_round", false},
                      // torch's CPU capability: avx2 and avx512 fuse lerp's multiply-add, default does not
                      {"cpu_capability", "avx2"}};
  if (kind != TorchaoState::Dense) {
    f.default_params["block_size"] = default_block;
    f.whole_blocks = true;  // a quantized state only for numel a multiple of the block (torchao_fresh_state)
  }
  if (kind == TorchaoState::Fp8) {
    f.default_params["overflow"] = "satfinite";
    f.default_params["nan_encoding"] = "torch";
    f.default_params["nan_widening"] = "c10";
  }
  // torch's CPU sqrt is not correctly rounded (MKL): the new parameter may differ by a proven library rounding
  f.default_tolerance = "torch-cpu-eager";
  const Schema f32_scalar = {.dtypes = {DType::F32}, .shape = scalar()};
  f.inputs = {{"param", {.dtypes = {DType::F32, DType::BF16}}},
              {"grad", {.dtypes = {DType::F32, DType::BF16}, .shape = same_shape("param")}},
              {"step", f32_scalar},
              {"lr", f32_scalar}};
  f.outputs = {{"param.next", {.dtypes = {DType::F32, DType::BF16}, .shape = same_shape("param"), .dtype_of = "param"}},
               {"step.next", f32_scalar}};
  const std::uint64_t qmap_entries = variant == "codebook4" ? 16 : 256;
  for (const char* moment : kMoments) {
    const bool amsgrad_only = moment == std::string("max_exp_avg_sq");
    for (const TensorSpec& t : state_tensors(moment, kind, "", amsgrad_only ? "amsgrad" : "", qmap_entries))
      (amsgrad_only ? f.optional_inputs : f.inputs).push_back(t);
    if (!amsgrad_only)
      for (const TensorSpec& t : state_tensors(moment, kind, ".next", "", qmap_entries)) f.outputs.push_back(t);
  }
  // one int32 draw per element of the parameter when the step rounds stochastically
  f.optional_inputs.push_back({"sr_random", {.dtypes = {DType::I32}, .shape = same_count("param"),
                                             .required_when = "bf16_stochastic_round"}});
  f.run = [kind](const Case& in, const nlohmann::json& p, int threads) {
    const optimizer::AdamHyper h = torchao_adam_hyper(in, p);
    optimizer::TorchaoAdamOptions o = options_from(in, p, kind);
    o.threads = worth_threads(in.require("param").element_count(), threads);
    const std::vector<std::int32_t> draws = random_draws(in, p);
    o.stochastic_round_random = draws;
    std::vector<float> param = widened(in.require("param"));
    const std::vector<float> grad = widened(in.require("grad"));
    float step = scalar(in, "step");
    optimizer::Moment m = read_state(in, "exp_avg", kind), v = read_state(in, "exp_avg_sq", kind);
    const bool amsgrad = p.at("amsgrad").get<bool>();
    optimizer::Moment v_max = amsgrad ? read_state(in, "max_exp_avg_sq", kind) : optimizer::Moment{};
    optimizer::torchao_adam_step(param, grad, step, m, v, amsgrad ? &v_max : nullptr, h, o);
    std::vector<Tensor> out = {narrowed("param.next", in.require("param"), param),
                               Tensor::from_f32("step.next", {}, std::vector<float>{step})};
    write_state(out, in, "exp_avg", m, kind);
    write_state(out, in, "exp_avg_sq", v, kind);
    if (amsgrad) write_state(out, in, "max_exp_avg_sq", v_max, kind);
    return out;
  };
  f.fresh_state = [kind, variant](std::span<const float> param, const nlohmann::json& p) {
    return torchao_fresh_state(param, p, kind, variant);
  };
  f.explain = [kind](const Case& e, const Case& a, const std::string& tensor) {
    return param_explainer(e, a, tensor, kind);
  };
  return f;
}

}  // namespace

void register_torchao_optimizer_formats(std::vector<FormatSpec>& out) {
  out.push_back(torchao_adam_format("codebook8", TorchaoState::Codebook, 256));
  out.push_back(torchao_adam_format("codebook4", TorchaoState::Codebook, 128));
  out.push_back(torchao_adam_format("fp8", TorchaoState::Fp8, 256));
  out.push_back(torchao_adam_format("dense", TorchaoState::Dense, 0));
}

}  // namespace lowbit
