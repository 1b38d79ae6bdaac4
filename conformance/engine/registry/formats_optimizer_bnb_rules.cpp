// Registry entries of bitsandbytes' 8-bit block-wise Lion, AdEMAMix, SGD with momentum, RMSprop and
// Adagrad as its CPU back end computes them (optimizer_bnb_rules.hpp). A case holds the state before
// the step (param, grad, step, <state>.codes/.scale/.qmap) and after it (".next"). Each state is a
// named moment: the one state of Lion (exp_avg), SGD (momentum_buffer), RMSprop (square_avg) and
// Adagrad (sum), torch's names for them; AdEMAMix's 2-D state1 as its two rows exp_avg (state1[0],
// absmax1[0]) and exp_avg_slow (state1[1], absmax1[1]), and exp_avg_sq (state2).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "formats_optimizer_io.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"

namespace lowbit {

namespace {

using namespace optimizer_io;

std::int64_t step_of(const Case& in) {
  const std::vector<std::int64_t> v = in.require("step").i64();
  if (v.size() != 1) throw CaseError(in.origin + ": tensor 'step' must hold one value");
  if (v[0] < 1) throw CaseError(in.origin + ": tensor 'step' must be at least 1 (the first step is 1)");
  return v[0];
}

// float32 param and grad; each state's codes in blocks of block_size (the last partial), one absmax
// per block, before and after the step; its 256-entry qmap. cuda: the CUDA kernels' fixed block of 256
// and no CPU capability.
FormatSpec states_format(const std::string& name, const std::vector<BnbStateName>& states, bool cuda = false) {
  FormatSpec f;
  f.name = name;
  const Schema f32_like_param = {.dtypes = {DType::F32}, .shape = same_shape("param")};
  f.inputs = {{"param", {.dtypes = {DType::F32}}}, {"grad", f32_like_param}, {"step", {.dtypes = {DType::I64}, .shape = scalar()}}};
  f.outputs = {{"param.next", f32_like_param}};
  const Extent block = cuda ? elements(256) : param_extent("block_size");
  for (const BnbStateName& s : states) {
    const std::string qmap = s.name + ".qmap";
    for (const std::string suffix : {"", ".next"}) {
      auto& list = suffix.empty() ? f.inputs : f.outputs;
      const std::string codes = s.name + ".codes" + suffix, scale = s.name + ".scale" + suffix;
      list.push_back({codes, blocks(block, {scale}), {.dtypes = {DType::U8}, .shape = same_count("param"), .indexes = qmap}});
      list.push_back({scale, block_entries(), {.dtypes = {DType::F32}, .shape = entry_per_block_of(codes)}});
    }
    f.inputs.push_back({qmap, {.dtypes = {DType::F32}, .shape = table_of(256)}});
  }
  if (!cuda) {
    f.default_params["block_size"] = 256;  // the CPU kernel's (blocksize = 256)
    // torch's CPU capability: avx2 and avx512 fuse add(alpha) and addcmul, default does not
    f.default_params["cpu_capability"] = "avx2";
  }
  f.fresh_state = [states](std::span<const float> param, const nlohmann::json&) { return bnb_fresh_state(param, states); };
  return f;
}

std::vector<Tensor> outputs_of(const std::vector<float>& param, const std::vector<std::pair<std::string, const optimizer::Moment*>>& m) {
  std::vector<Tensor> out = {Tensor::from_f32("param.next", flat(param.size()), param)};
  for (const auto& [name, moment] : m) write_moment(out, name, *moment, false);
  return out;
}

// A differing new parameter is a library rounding when the expected and the actual bits are both
// reproduced with the rule's sqrt correctly rounded or moved to the other float bracketing the exact
// root (torch's CPU sqrt is faithful, not always correctly rounded: docs/formats/bnb-adam8bit.md).
// element(i, ulps) -> {new parameter, the value whose root the rule takes}.
using SqrtElement = std::function<std::pair<float, float>(std::size_t i, int sqrt_ulps)>;
ElementExplainer sqrt_explainer(const Case& expected, const Case& actual, const std::string& tensor,
                                const std::function<SqrtElement(const Case&, const nlohmann::json&)>& make) {
  const Tensor* got = actual.find("param.next");
  const Tensor* want = expected.find("param.next");
  if (tensor != "param.next" || !got || !want || got->dtype != DType::F32 || want->dtype != DType::F32) return {};
  const nlohmann::json p = resolve_params(*find_format(expected.format()), expected.params());
  const SqrtElement element = make(expected, p);
  const std::size_t n = expected.require("param").element_count();
  return [=](std::size_t i) -> Explanation {
    if (i >= n || i >= got->element_count()) return {};
    const auto [own, root_of] = element(i, 0);
    std::vector<std::uint64_t> candidates = {bits_of(own)};
    if (const int other = faithful_sqrt_other(root_of)) candidates.push_back(bits_of(element(i, other).first));
    if (both_reproduced(want->bits_at(i), got->bits_at(i), candidates)) return classed(MismatchClass::LibraryRounding);
    return {};
  };
}

// ---- one-state rules -----------------------------------------------------------------------------

struct RuleSpec {
  const char* name;
  nlohmann::json defaults;
  const char* description;
  const char* provenance;
  // The rule, its state and the params passed as the kernel's betas: bnb_one_state's table, which the
  // diagnosis's variants read too (formats_optimizer_io.hpp)
  const BnbOneState& one() const { return *bnb_one_state(name); }
};

// What a rule's CPU and CUDA formats share: the case tensors, the strings and the default params.
FormatSpec rule_states_format(const RuleSpec& r, bool cuda) {
  FormatSpec f = states_format(r.name, {{r.one().state, true}}, cuda);  // Optimizer1State: the signed map for every rule
  f.description = r.description;
  f.provenance = r.provenance;
  f.default_params.update(r.defaults);
  return f;
}

FormatSpec rule_format(const RuleSpec& r) {
  FormatSpec f = rule_states_format(r, false);
  const std::string state = r.one().state;
  const optimizer::BnbRule rule = r.one().rule;
  const char* b1 = r.one().beta1;
  const char* b2 = r.one().beta2;
  f.run = [state, rule, b1, b2](const Case& in, const nlohmann::json& p, int threads) {
    std::vector<float> param = in.require("param").f32();
    optimizer::Moment m = read_moment(in, state, false);
    optimizer::bnb_rule_cpu_step(rule, param, in.require("grad").f32(), step_of(in), m, bnb_rule_hyper(p, b1, b2),
                                 positive_size_param(p, "block_size"), worth_threads(param.size(), threads));
    return outputs_of(param, {{state, &m}});
  };
  if (rule == optimizer::BnbRule::Rmsprop || rule == optimizer::BnbRule::Adagrad) {
    f.default_tolerance = "torch-cpu-eager";
    f.explain = [state, rule, b1, b2](const Case& expected, const Case& actual, const std::string& tensor) {
      return sqrt_explainer(expected, actual, tensor, [&](const Case& c, const nlohmann::json& p) -> SqrtElement {
        const optimizer::Moment m = read_moment(c, state, false);
        auto old = std::make_shared<const std::vector<float>>(
            blockwise::bnb_dequantize(m.codes, m.scale, m.qmap, positive_size_param(p, "block_size")));
        auto param = std::make_shared<const std::vector<float>>(c.require("param").f32());
        auto grad = std::make_shared<const std::vector<float>>(c.require("grad").f32());
        const optimizer::BnbRuleScalars s = optimizer::bnb_rule_scalars(bnb_rule_hyper(p, b1, b2));
        const std::int64_t step = step_of(c);
        return [=](std::size_t i, int ulps) -> std::pair<float, float> {
          if (i >= old->size() || i >= grad->size()) return {0.0f, 0.0f};
          const auto e = optimizer::bnb_rule_cpu_element(rule, (*param)[i], (*grad)[i], (*old)[i], step, s, ulps);
          return {e.param, e.state};
        };
      });
    };
  }
  return f;
}

std::vector<RuleSpec> rule_specs() {
  return {
      {"bnb.lion8bit.cpu",
       {{"lr", 1e-4}, {"beta1", 0.9}, {"beta2", 0.99}, {"weight_decay", 0.0}},
       "one bitsandbytes 8-bit block-wise Lion step (Lion8bit, PagedLion8bit) as its CPU kernel computes it: "
       "decoupled decay, sign of the interpolation beta1 (three roundings; sign of NaN is 0), the parameter moved "
       "by lr, then the state's EMA with beta2 (ATen's fused add), requantized with the CPU lookup table",
       "bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu (optimizer 'lion')"},
      {"bnb.momentum8bit.cpu",
       {{"lr", 1e-2}, {"momentum", 0.9}, {"weight_decay", 0.0}},
       "one bitsandbytes 8-bit block-wise SGD-with-momentum step (SGD8bit; LARS8bit passes the same rule and its "
       "trust ratio is not applied) as its CPU kernel computes it: L2 decay added to the gradient, the buffer "
       "copied at step 1 and momentum * buf + grad after (no dampening), requantized with the CPU lookup table",
       "bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu (optimizer 'momentum'/'lars')"},
      {"bnb.rmsprop8bit.cpu",
       {{"lr", 1e-2}, {"alpha", 0.99}, {"eps", 1e-8}, {"weight_decay", 0.0}},
       "one bitsandbytes 8-bit block-wise RMSprop step (RMSprop8bit) as its CPU kernel computes it: L2 decay "
       "added to the gradient, alpha * s + (1 - alpha) g^2 (ATen's addcmul), p - lr g / (sqrt(s) + eps), the "
       "state requantized with the signed map and the CPU lookup table",
       "bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu (optimizer 'rmsprop')"},
      {"bnb.adagrad8bit.cpu",
       {{"lr", 1e-2}, {"eps", 1e-10}, {"weight_decay", 0.0}},
       "one bitsandbytes 8-bit block-wise Adagrad step (Adagrad8bit) as its CPU kernel computes it: L2 decay "
       "added to the gradient, s + g^2 (ATen's addcmul), p - lr g / (sqrt(s) + eps), the state requantized "
       "with the signed map and the CPU lookup table",
       "bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu (optimizer 'adagrad')"},
  };
}

// ---- AdEMAMix -------------------------------------------------------------------------------------

// AdEMAMix's three states (state1's two rows, signed; state2, unsigned) and AdEMAMix8bit's defaults,
// the same for the CPU and the CUDA format.
FormatSpec ademamix_states_format(const std::string& name, bool cuda) {
  FormatSpec f = states_format(name, {{"exp_avg", true}, {"exp_avg_slow", true}, {"exp_avg_sq", false}}, cuda);
  f.default_params.update(nlohmann::json{{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"beta3", 0.9999},
                                         {"alpha", 5.0}, {"t_alpha", 0}, {"t_beta3", 0}, {"eps", 1e-8},
                                         {"weight_decay", 1e-2}});
  return f;
}

FormatSpec ademamix_format() {
  FormatSpec f = ademamix_states_format("bnb.ademamix8bit.cpu", false);
  f.description = "one bitsandbytes 8-bit block-wise AdEMAMix step (AdEMAMix8bit, PagedAdEMAMix8bit) as its CPU "
                  "kernel computes it: the fast and slow EMAs (state1's two rows) and the second moment with ATen's "
                  "fused add/addcmul, (m1 / c1 + alpha m2) / (sqrt(nu) / c2 + eps), decay before the update, "
                  "the alpha and beta3 schedulers, requantized with the CPU lookup table";
  f.provenance = "bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu (optimizer 'ademamix') "
                 "and optim/ademamix.py AdEMAMix.update_step (schedulers)";
  f.default_tolerance = "torch-cpu-eager";
  f.run = [](const Case& in, const nlohmann::json& p, int threads) {
    std::vector<float> param = in.require("param").f32();
    optimizer::Moment m1 = read_moment(in, "exp_avg", false), m2 = read_moment(in, "exp_avg_slow", false),
                      nu = read_moment(in, "exp_avg_sq", false);
    optimizer::bnb_ademamix_cpu_step(param, in.require("grad").f32(), step_of(in), m1, m2, nu, bnb_ademamix_hyper(p),
                                     positive_size_param(p, "block_size"), worth_threads(param.size(), threads));
    return outputs_of(param, {{"exp_avg", &m1}, {"exp_avg_slow", &m2}, {"exp_avg_sq", &nu}});
  };
  f.explain = [](const Case& expected, const Case& actual, const std::string& tensor) {
    return sqrt_explainer(expected, actual, tensor, [](const Case& c, const nlohmann::json& p) -> SqrtElement {
      const std::size_t block = positive_size_param(p, "block_size");
      auto old = std::make_shared<std::vector<std::vector<float>>>();
      for (const char* name : {"exp_avg", "exp_avg_slow", "exp_avg_sq"}) {
        const optimizer::Moment m = read_moment(c, name, false);
        old->push_back(blockwise::bnb_dequantize(m.codes, m.scale, m.qmap, block));
      }
      auto param = std::make_shared<const std::vector<float>>(c.require("param").f32());
      auto grad = std::make_shared<const std::vector<float>>(c.require("grad").f32());
      const optimizer::BnbAdemamixScalars s = optimizer::bnb_ademamix_scalars(bnb_ademamix_hyper(p), step_of(c));
      return [=](std::size_t i, int ulps) -> std::pair<float, float> {
        if (i >= grad->size() || i >= (*old)[2].size()) return {0.0f, 0.0f};
        const auto e =
            optimizer::bnb_ademamix_cpu_element((*param)[i], (*grad)[i], (*old)[0][i], (*old)[1][i], (*old)[2][i], s, ulps);
        return {e.param, e.nu};
      };
    });
  };
  return f;
}

// ---- CUDA ----------------------------------------------------------------------------------------

// The one-state CUDA kernel's rules: the CPU rule's case tensors and params, without block_size
// (the kernel's is 256) and cpu_capability.
FormatSpec rule_cuda_format(const RuleSpec& r) {
  FormatSpec f = rule_states_format(r, true);
  // The real kernel's __fdividef and approximate sqrtf are not modelled: codes may differ at ties and
  // near boundaries, RMSprop's and Adagrad's parameters by ulps.
  f.default_tolerance = "bnb-cuda";
  f.run = [r](const Case& in, const nlohmann::json& p, int /*threads*/) {
    std::vector<float> param = in.require("param").f32();
    const BnbOneState& one = r.one();
    optimizer::Moment m = read_moment(in, one.state, false);
    const std::int64_t step = step_of(in);
    if (step > INT32_MAX) throw CaseError(in.origin + ": step must be an int32 >= 1 (the kernel's type)");
    optimizer::bnb_rule_cuda_step(one.rule, param, in.require("grad").f32(), step, m, bnb_rule_hyper(p, one.beta1, one.beta2));
    return outputs_of(param, {{one.state, &m}});
  };
  return f;
}

// The CUDA kernel's formats: each CPU rule's state, params and defaults (the same Python optimizer
// passes them), with its own name and words.
std::vector<RuleSpec> rule_cuda_specs() {
  struct CudaText {
    optimizer::BnbRule rule;
    const char *name, *description, *provenance;
  };
  static const CudaText texts[] = {
      {optimizer::BnbRule::Lion, "bnb.lion8bit.cuda",
       "one bitsandbytes 8-bit block-wise Lion step (Lion8bit, PagedLion8bit) as its one-state CUDA kernel "
       "computes it, with IEEE arithmetic for the fast-math intrinsics: decay before the update, "
       "1 - beta in float32, sign of NaN 0, no NaN/Inf reset (NaN states canonical), absmax over all 256 "
       "slots (tail padding included), sign fix with the 255 wrap",
       "bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise (LION, float32, block 256)"},
      {optimizer::BnbRule::Momentum, "bnb.momentum8bit.cuda",
       "one bitsandbytes 8-bit block-wise SGD-with-momentum step (SGD8bit, PagedSGD8bit) as its one-state CUDA "
       "kernel computes it, with IEEE arithmetic for the fast-math intrinsics: L2 decay fma(p, wd, g) only "
       "when wd > 0, the buffer copied at step 1 and fma(buf, momentum, g) after (no dampening), "
       "p = fma(-lr, buf, p), no NaN/Inf reset (NaN states canonical), absmax over all 256 slots (tail padding "
       "included), sign fix with the 255 wrap",
       "bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise (MOMENTUM, float32, block 256)"},
      {optimizer::BnbRule::Rmsprop, "bnb.rmsprop8bit.cuda",
       "one bitsandbytes 8-bit block-wise RMSprop step (RMSprop8bit, PagedRMSprop8bit) as its one-state CUDA kernel "
       "computes it, with IEEE arithmetic for the fast-math intrinsics: L2 decay fma(p, wd, g) only when wd > 0 and "
       "only in the state, fma(s, alpha, (1 - alpha) g'^2) with 1 - alpha in float32, p = fma(-lr, g / (sqrt(s) + "
       "eps), p) dividing the plain gradient, no NaN/Inf reset (NaN states canonical), absmax over all 256 slots "
       "(tail padding included), the signed map's sign fix with the 255 wrap",
       "bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise (RMSPROP, float32, block 256)"},
      {optimizer::BnbRule::Adagrad, "bnb.adagrad8bit.cuda",
       "one bitsandbytes 8-bit block-wise Adagrad step (Adagrad8bit, PagedAdagrad8bit) as its one-state CUDA kernel "
       "computes it, with IEEE arithmetic for the fast-math intrinsics: L2 decay fma(p, wd, g) only when wd > 0 and "
       "only in the state, s = fma(g', g', s), p = fma(-lr, g / (sqrt(s) + eps), p) dividing the plain gradient, "
       "no NaN/Inf reset (NaN states canonical), absmax over all 256 slots (tail padding included), the signed "
       "map's sign fix with the 255 wrap",
       "bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise (ADAGRAD, float32, block 256)"},
  };
  std::vector<RuleSpec> out;
  for (const CudaText& c : texts)
    for (RuleSpec r : rule_specs())
      if (r.one().rule == c.rule) {
        r.name = c.name;
        r.description = c.description;
        r.provenance = c.provenance;
        out.push_back(r);
      }
  return out;
}

// AdEMAMix on CUDA: the two-state kernel. Sizes that 256 does not divide are refused: there the
// kernel's slow-moment absmax index races (docs/formats/bnb-ademamix8bit.md), which no model can pin.
FormatSpec ademamix_cuda_format() {
  FormatSpec f = ademamix_states_format("bnb.ademamix8bit.cuda", true);
  f.description = "one bitsandbytes 8-bit block-wise AdEMAMix step (AdEMAMix8bit, PagedAdEMAMix8bit) as its two-state "
                  "CUDA kernel computes it, with IEEE arithmetic for the fast-math intrinsics: Adam's kernel with the slow "
                  "EMA, a NaN/Inf gradient resetting all three moments, (m1 / c1 + alpha m2) / (sqrt(nu) / c2 + eps), "
                  "decay after the update, the schedulers' alpha and beta3 in float32; element counts that 256 does not "
                  "divide refused (the kernel's slow-moment absmax index races there)";
  f.provenance = "bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise (ADEMAMIX, float32, block 256) "
                 "and optim/ademamix.py AdEMAMix.update_step (schedulers)";
  // The real kernel's __fdividef, division, sqrtf and __powf are not modelled: codes may differ at ties
  // and near boundaries, the parameter by ulps.
  f.default_tolerance = "bnb-cuda";
  f.run = [](const Case& in, const nlohmann::json& p, int /*threads*/) {
    std::vector<float> param = in.require("param").f32();
    if (param.size() % 256 != 0)
      throw CaseError(in.origin + ": " + std::to_string(param.size()) +
                      " elements: bnb.ademamix8bit.cuda takes whole blocks of 256 only (for any other count the "
                      "kernel's slow-moment absmax index (n + i) / 256 makes two thread blocks race for one absmax)");
    const std::int64_t step = step_of(in);
    if (step > INT32_MAX) throw CaseError(in.origin + ": step must be an int32 >= 1 (the kernel's type)");
    optimizer::Moment m1 = read_moment(in, "exp_avg", false), m2 = read_moment(in, "exp_avg_slow", false),
                      nu = read_moment(in, "exp_avg_sq", false);
    optimizer::bnb_ademamix_cuda_step(param, in.require("grad").f32(), static_cast<std::int32_t>(step), m1, m2, nu,
                                      bnb_ademamix_hyper(p));
    return outputs_of(param, {{"exp_avg", &m1}, {"exp_avg_slow", &m2}, {"exp_avg_sq", &nu}});
  };
  return f;
}

}  // namespace

void register_bnb_rule_formats(std::vector<FormatSpec>& out) {
  out.push_back(ademamix_format());
  for (const RuleSpec& r : rule_specs()) out.push_back(rule_format(r));
  for (const RuleSpec& r : rule_cuda_specs()) out.push_back(rule_cuda_format(r));
  out.push_back(ademamix_cuda_format());
}

}  // namespace lowbit
