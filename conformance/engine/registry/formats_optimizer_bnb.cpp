// Registry entries of bitsandbytes' 8-bit block-wise Adam: as its CPU kernel computes it, and an
// IEEE model of its CUDA kernel. A case holds the state before the step (param, grad, step,
// exp_avg.*, exp_avg_sq.*) and after it (the same names with ".next").
#include <cmath>

#include "formats_optimizer_io.hpp"
#include "lowbit/bf16_round.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/optimizer.hpp"

namespace lowbit {

namespace {

using namespace optimizer_io;

std::int64_t step_of(const Case& in) {
  const std::vector<std::int64_t> v = in.require("step").i64();
  if (v.size() != 1) throw CaseError(in.origin + ": tensor 'step' must hold one value");
  return v[0];
}

// The float32 parameter as `p.data.copy_(p_fp32)` writes it into a bf16 parameter (torch's CPU copy:
// round to nearest even; a NaN is 0xFFFF when vectorized, capabilities AVX2 and AVX-512, and c10's
// 0x7FC0 when scalar, capability default), as the bits of the case's dtype; float32 stays as it is.
std::uint64_t written_bits(float p32, DType dtype, bool vectorized) {
  if (dtype != DType::BF16) return bits_of(p32);
  return vectorized ? bf16_round_nearest_even(p32) : bf16_round_nearest_even_c10(p32);
}

// The moments written out without ATen's fused multiply-adds (add_ with alpha, addcmul_): a multiply
// and an add each, two roundings; the rest as bnb_adam_cpu_element with a correctly rounded root. Not
// a reference: the explainer's model of a kernel that computes it so.
float bnb_unfused_param(float p, float g, float m_old, float v_old, const optimizer::BnbAdamScalars& s) {
  const float m = m_old * s.b1 + g * s.w1;
  const float v = v_old * s.b2 + (s.w2 * g) * g;
  const float denom = std::sqrt(v) / s.c2 + s.eps;
  if (s.decays) p = p * s.decay;
  return p + (s.step_value * m) / denom;
}

// As for torchao: the unfused variant first (arithmetic-variant "unfused-fma" where it reproduces the
// actual bits and the reference does not); then a differing new parameter is a library rounding when both sides are values the
// reference computes with torch's CPU sqrt(v) correctly rounded or the other float bracketing the exact
// root (a faithful sqrt's only other result).
// The states and scalars are read once per comparison; each element then costs 3 steps.
ElementExplainer bnb_param_explainer(const Case& expected, const Case& actual, const std::string& tensor) {
  const Tensor* got = actual.find("param.next");
  const Tensor* want = expected.find("param.next");
  if (tensor != "param.next" || !got || !want || got->dtype != want->dtype) return {};
  const nlohmann::json p = resolve_params(*find_format(expected.format()), expected.params());
  const DType dtype = want->dtype;
  const bool vectorized = optimizer_io::fused_on(p);  // the capability: vectorized kernels fuse and copy alike
  const auto block = positive_size_param(p, "block_size");
  const optimizer::Moment m = read_moment(expected, "exp_avg", false), v = read_moment(expected, "exp_avg_sq", false);
  auto m_old = std::make_shared<const std::vector<float>>(blockwise::bnb_dequantize(m.codes, m.scale, m.qmap, block));
  auto v_old = std::make_shared<const std::vector<float>>(blockwise::bnb_dequantize(v.codes, v.scale, v.qmap, block));
  const auto s = optimizer::bnb_adam_scalars(bnb_adam_hyper(p), step_of(expected));
  const Tensor* param = &expected.require("param");
  const Tensor* grad = &expected.require("grad");
  return [=](std::size_t i) -> Explanation {
    if (i >= got->element_count() || i >= m_old->size() || i >= v_old->size()) return {};
    const float pv = param->value_as_float(i), gv = grad->value_as_float(i);
    const std::uint64_t variant = written_bits(bnb_unfused_param(pv, gv, (*m_old)[i], (*v_old)[i], s), dtype, vectorized);
    const std::uint64_t own =
        written_bits(optimizer::bnb_adam_cpu_element(pv, gv, (*m_old)[i], (*v_old)[i], s).param, dtype, vectorized);
    if (variant == got->bits_at(i) && variant != own) {
      return classed(MismatchClass::ArithmeticVariant, "unfused-fma");
    }
    std::vector<std::uint64_t> candidates;
    // sqrt(v) as MKL may give it: correctly rounded, or the other float bracketing the exact root
    const int other = faithful_sqrt_other(optimizer::bnb_adam_cpu_element(pv, gv, (*m_old)[i], (*v_old)[i], s).exp_avg_sq);
    for (int sqrt_v : {0, other})
      candidates.push_back(
          written_bits(optimizer::bnb_adam_cpu_element(pv, gv, (*m_old)[i], (*v_old)[i], s, sqrt_v).param, dtype, vectorized));
    if (both_reproduced(want->bits_at(i), got->bits_at(i), candidates)) return classed(MismatchClass::LibraryRounding);
    return {};
  };
}

// Each state's codes lie in blocks of `block` (the last one partial), quantized with the block's entry
// of the state's own absmax ("scale"), before the step and after it (".next").
FormatSpec bnb_adam_format(const std::string& name, const Extent& block) {
  FormatSpec f;
  f.name = name;
  f.default_params = {{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.0}, {"lr", 1e-3}};
  const Schema f32_like_param = {.dtypes = {DType::F32}, .shape = same_shape("param")};
  f.inputs = {{"param", {.dtypes = {DType::F32}}}, {"grad", f32_like_param}, {"step", {.dtypes = {DType::I64}, .shape = scalar()}}};
  f.outputs = {{"param.next", f32_like_param}};
  for (const std::string state : {"exp_avg", "exp_avg_sq"}) {
    // the codes index the state's 256-entry qmap; one absmax per block, before the step and after it
    const std::string qmap = state + ".qmap";
    for (const std::string suffix : {"", ".next"}) {
      auto& list = suffix.empty() ? f.inputs : f.outputs;
      const std::string codes = state + ".codes" + suffix, scale = state + ".scale" + suffix;
      list.push_back({codes, blocks(block, {scale}), {.dtypes = {DType::U8}, .shape = same_count("param"), .indexes = qmap}});
      list.push_back({scale, block_entries(), {.dtypes = {DType::F32}, .shape = entry_per_block_of(codes)}});
    }
    f.inputs.push_back({qmap, {.dtypes = {DType::F32}, .shape = table_of(256)}});
  }
  f.fresh_state = [](std::span<const float> param, const nlohmann::json&) {
    return bnb_fresh_state(param, {{"exp_avg", true}, {"exp_avg_sq", false}});
  };
  return f;
}

std::vector<Tensor> outputs_of(const Case& in, const std::vector<float>& param, const optimizer::Moment& m,
                               const optimizer::Moment& v) {
  std::vector<Tensor> out = {narrowed("param.next", in.require("param"), param)};
  write_moment(out, "exp_avg", m, false);
  write_moment(out, "exp_avg_sq", v, false);
  return out;
}

FormatSpec bnb_adam_cpu_format() {
  FormatSpec f = bnb_adam_format("bnb.adam8bit.cpu", param_extent("block_size"));
  f.description = "one bitsandbytes 8-bit block-wise Adam/AdamW step as its CPU kernel computes it: dequantize, "
                  "moments with ATen's fused add/addcmul, decoupled weight decay before the update, requantize with "
                  "the CPU lookup table (block 256, partial tail)";
  f.provenance = "bitsandbytes 0.50 backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu (optimizer 'adam')";
  f.default_params["block_size"] = 256;
  // torch's CPU capability: avx2 and avx512 fuse add(alpha) and addcmul, default does not
  f.default_params["cpu_capability"] = "avx2";
  f.default_tolerance = "torch-cpu-eager";
  // a bf16 parameter (and its bf16 gradient, as the optimizer passes p.grad): the kernel widens both
  // (g.float(), p.data.float()), steps in float32 and copies the result back into the bf16 parameter
  const std::vector<DType> param_dtypes = {DType::F32, DType::BF16};
  f.inputs[0].schema.dtypes = param_dtypes;
  f.inputs[1].schema = {.dtypes = param_dtypes, .shape = same_shape("param"), .dtype_of = "param"};
  f.outputs[0].schema = {.dtypes = param_dtypes, .shape = same_shape("param"), .dtype_of = "param"};
  f.run = [](const Case& in, const nlohmann::json& p, int threads) {
    const Tensor& param_in = in.require("param");
    std::vector<float> param = widened(param_in);
    optimizer::Moment m = read_moment(in, "exp_avg", false), v = read_moment(in, "exp_avg_sq", false);
    optimizer::bnb_adam_cpu_step(param, widened(in.require("grad")), step_of(in), m, v, bnb_adam_hyper(p),
                                 positive_size_param(p, "block_size"), worth_threads(param.size(), threads));
    if (param_in.dtype == DType::BF16)
      for (float& x : param) x = widen_bf16(static_cast<std::uint16_t>(written_bits(x, DType::BF16, fused_on(p))));
    return outputs_of(in, param, m, v);
  };
  f.explain = bnb_param_explainer;
  return f;
}

FormatSpec bnb_adam_cuda_format() {
  FormatSpec f = bnb_adam_format("bnb.adam8bit.cuda", elements(256));  // the kernel's fixed block
  f.description = "one bitsandbytes 8-bit block-wise Adam/AdamW step as its CUDA kernel computes it, with IEEE "
                  "arithmetic for the fast-math intrinsics: NaN/Inf gradients reset the moments, decay after the "
                  "update, absmax over all 256 slots (tail padding included), sign fix with the 255 wrap";
  f.provenance = "bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise (ADAM, float32, block 256)";
  // The real kernel's __powf, __fdividef and approximate sqrt are not modelled: codes may differ at
  // ties and near boundaries; the parameter's tolerance is unset until a GPU measures it.
  f.default_tolerance = "bnb-cuda";
  f.run = [](const Case& in, const nlohmann::json& p, int /*threads*/) {
    std::vector<float> param = in.require("param").f32();
    optimizer::Moment m = read_moment(in, "exp_avg", false), v = read_moment(in, "exp_avg_sq", false);
    const std::int64_t step = step_of(in);
    if (step < 1 || step > INT32_MAX) throw CaseError(in.origin + ": step must be an int32 >= 1 (the kernel's type)");
    optimizer::bnb_adam_cuda_step(param, in.require("grad").f32(), static_cast<std::int32_t>(step), m, v,
                                  bnb_adam_hyper(p));
    return outputs_of(in, param, m, v);
  };
  return f;
}

}  // namespace

void register_bnb_optimizer_formats(std::vector<FormatSpec>& out) {
  out.push_back(bnb_adam_cpu_format());
  out.push_back(bnb_adam_cuda_format());
}

}  // namespace lowbit
