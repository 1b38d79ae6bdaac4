// torchao's Adam/AdamW step on low-bit and dense states (optimizer.hpp; docs/formats/torchao-adam.md).
#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "fast_ops.hpp"
#include "lowbit/bf16_round.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/optimizer.hpp"
#include "parallel_blocks.hpp"

namespace lowbit::optimizer {

std::vector<float> dequantize(const Moment& m, TorchaoState kind, std::size_t block) {
  switch (kind) {
    case TorchaoState::Fp8: return blockwise::torchao_fp8_dequantize(m.codes, m.scale, block);
    case TorchaoState::Codebook: return blockwise::torchao_dequantize(m.codes, m.scale, m.qmap, block);
    case TorchaoState::Dense: return m.values;
  }
  throw std::logic_error("dequantize: unknown state kind");
}

namespace {

// The value a tensor of the parameter's dtype holds after copy_(x).
float round_to(ParamDtype dtype, float x) {
  return dtype == ParamDtype::BFloat16 ? widen_bf16(bf16_round_nearest_even(x)) : x;
}

// exp_avg.copy_(values): requantize a low-bit state with a fresh scale, or store a dense one.
void store(Moment& m, std::span<const float> values, const TorchaoAdamOptions& o) {
  if (o.kind == TorchaoState::Dense) {
    m.values.resize(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) m.values[i] = round_to(o.param_dtype, values[i]);
    return;
  }
  blockwise::Quantized q = o.kind == TorchaoState::Fp8
                               ? blockwise::torchao_fp8_quantize(values, o.block_size, o.fp8_policy)
                               : blockwise::torchao_quantize(values, m.qmap, o.block_size);
  m.codes = std::move(q.codes);
  m.scale = std::move(q.scale);
}

std::size_t state_size(const Moment& m, TorchaoState kind) {
  return kind == TorchaoState::Dense ? m.values.size() : m.codes.size();
}

// What both step functions refuse before they change anything.
void check_step_inputs(std::size_t n, std::size_t grad, const Moment& exp_avg, const Moment& exp_avg_sq,
                       const Moment* max_exp_avg_sq, const TorchaoAdamOptions& o) {
  if (grad != n || state_size(exp_avg, o.kind) != n || state_size(exp_avg_sq, o.kind) != n ||
      (max_exp_avg_sq && state_size(*max_exp_avg_sq, o.kind) != n))
    throw std::invalid_argument("torchao_adam_step: param, grad and state sizes differ");
  if (!o.stochastic_round_random.empty() &&
      (o.param_dtype != ParamDtype::BFloat16 || o.stochastic_round_random.size() != n))
    throw std::invalid_argument("torchao_adam_step: stochastic rounding needs a bf16 parameter and one draw per element");
}

// The parameter as the step writes it back: RNE into its dtype, or torchao's stochastic rounding.
float written(float p32, std::size_t i, const TorchaoAdamOptions& o) {
  return o.stochastic_round_random.empty() ? round_to(o.param_dtype, p32)
                                           : widen_bf16(bf16_stochastic_round(p32, o.stochastic_round_random[i]));
}

// x moved by k binary32 ulps (k in -1..1 here), toward +inf for k > 0.
float step_ulps(float x, int k) {
  const float toward = k > 0 ? INFINITY : -INFINITY;
  for (int i = 0; i < std::abs(k); ++i) x = std::nextafter(x, toward);
  return x;
}

}  // namespace

TorchaoAdamScalars torchao_adam_scalars(const AdamHyper& h, float step, int sqrt_bc2_ulps) {
  TorchaoAdamScalars s;
  // Python floats meet float32 tensors: each is rounded to float32 first; 1 - beta is computed
  // in double, then rounded (0.1 -> 0x3DCCCCCD, 0.001 -> 0x3A83126F).
  s.lr = h.lr;
  s.wd = static_cast<float>(h.weight_decay);
  s.w1 = static_cast<float>(1.0 - h.beta1);
  s.w2 = static_cast<float>(1.0 - h.beta2);
  s.eps = static_cast<float>(h.eps);
  s.adamw = h.adamw;
  s.fused = h.fused;
  // beta ** step on a float32 tensor is powf (glibc's, as torch's CPU kernel calls it)
  s.bc1 = 1.0f - std::pow(static_cast<float>(h.beta1), step);
  const float bc2 = 1.0f - std::pow(static_cast<float>(h.beta2), step);
  s.sqrt_bc2 = step_ulps(std::sqrt(bc2), sqrt_bc2_ulps);
  return s;
}

AdamElement torchao_adam_element(float p, float g, float m_old, float v_old, const TorchaoAdamScalars& s,
                                 int sqrt_v_ulps, const float* max_old) {
  if (s.adamw) p = p - (s.lr * s.wd) * p;  // decoupled, on the pre-update parameter
  else g = g + s.wd * p;                    // L2 on the gradient
  // torch.lerp with |weight| < 0.5: start + weight * (end - start), one fused rounding in the
  // vectorized CPU kernels (AVX2, AVX-512), two in the scalar ones (capability default)
  const auto lerp = [&s](float start, float end, float weight) {
    return s.fused ? std::fma(weight, end - start, start) : start + weight * (end - start);
  };
  const float m = lerp(m_old, g, s.w1);
  const float v = lerp(v_old, g * g, s.w2);
  // torch.maximum propagates a NaN from either side
  const float v_max = max_old ? (std::isnan(*max_old) || std::isnan(v) ? NAN : std::max(*max_old, v)) : v;
  const float denom = step_ulps(std::sqrt(v_max), sqrt_v_ulps) / s.sqrt_bc2 + s.eps;
  return {p - (s.lr * (m / s.bc1)) / denom, m, v, v_max};  // the unquantized moments update the parameter
}

void scalar::torchao_adam_step(std::span<float> param, std::span<const float> grad, float& step, Moment& exp_avg,
                               Moment& exp_avg_sq, Moment* max_exp_avg_sq, const AdamHyper& h,
                               const TorchaoAdamOptions& o) {
  const std::size_t n = param.size();
  check_step_inputs(n, grad.size(), exp_avg, exp_avg_sq, max_exp_avg_sq, o);
  step += 1.0f;  // a float32 counter: stops increasing at 2^24
  const TorchaoAdamScalars s = torchao_adam_scalars(h, step);
  const std::vector<float> m_old = dequantize(exp_avg, o.kind, o.block_size);
  const std::vector<float> v_old = dequantize(exp_avg_sq, o.kind, o.block_size);
  const std::vector<float> max_old = max_exp_avg_sq ? dequantize(*max_exp_avg_sq, o.kind, o.block_size)
                                                    : std::vector<float>{};
  std::vector<float> m(n), v(n), v_max(max_exp_avg_sq ? n : 0);
  for (std::size_t i = 0; i < n; ++i) {
    const AdamElement e =
        torchao_adam_element(param[i], grad[i], m_old[i], v_old[i], s, 0, max_exp_avg_sq ? &max_old[i] : nullptr);
    param[i] = written(e.param, i, o);
    m[i] = e.exp_avg;
    v[i] = e.exp_avg_sq;
    if (max_exp_avg_sq) v_max[i] = e.max_exp_avg_sq;
  }
  store(exp_avg, m, o);
  store(exp_avg_sq, v, o);
  if (max_exp_avg_sq) store(*max_exp_avg_sq, v_max, o);
}

// ---- the fast path ---------------------------------------------------------------------------------
// The same stages as the definition above, each on options.threads threads: the block-wise fast paths
// dequantize into buffers allocated once per step (a dense state is updated in place), the vector
// kernel (fast_kernels.hpp torchao_adam_span) updates consecutive ranges of whole blocks, and the
// quantizers' fast paths store the moments. The bf16 write-back (and stochastic rounding) and a bf16
// dense state's rounding stay scalar, per element, in the same threads: integer bit work on one
// element at a time, not worth a kernel. No element depends on another, and each block's scale and
// codes on that block alone, so the bytes are the definition's for any thread count.

namespace {

constexpr std::size_t kDenseRange = 16384;  // a dense state has no blocks: the threads split it in these

}  // namespace

void torchao_adam_step(std::span<float> param, std::span<const float> grad, float& step, Moment& exp_avg,
                       Moment& exp_avg_sq, Moment* max_exp_avg_sq, const AdamHyper& h, const TorchaoAdamOptions& o) {
  const std::size_t n = param.size();
  check_step_inputs(n, grad.size(), exp_avg, exp_avg_sq, max_exp_avg_sq, o);
  if (o.threads < 1) throw std::invalid_argument("torchao_adam_step: threads must be at least 1");
  const bool dense = o.kind == TorchaoState::Dense;
  step += 1.0f;
  const TorchaoAdamScalars s = torchao_adam_scalars(h, step);
  // not zero-filled: every element is written by the dequantizer before it is read
  std::unique_ptr<float[]> m_buffer, v_buffer, max_buffer;
  const auto old_values = [&](Moment& moment, std::unique_ptr<float[]>& storage) -> std::span<float> {
    if (dense) return moment.values;  // updated in place
    storage = std::make_unique_for_overwrite<float[]>(n);
    const std::span<float> buffer(storage.get(), n);
    if (o.kind == TorchaoState::Fp8)
      blockwise::torchao_fp8_dequantize_into(moment.codes, moment.scale, o.block_size, blockwise::NanWidening::Payload,
                                             buffer, o.threads);
    else blockwise::torchao_dequantize_into(moment.codes, moment.scale, moment.qmap, o.block_size, buffer, o.threads);
    return buffer;
  };
  const std::span<float> m = old_values(exp_avg, m_buffer), v = old_values(exp_avg_sq, v_buffer);
  const std::span<float> v_max = max_exp_avg_sq ? old_values(*max_exp_avg_sq, max_buffer) : std::span<float>{};
  const fast::Ops& ops = fast::ops();
  const std::size_t unit = dense ? kDenseRange : o.block_size;
  const bool bf16 = o.param_dtype == ParamDtype::BFloat16;
  parallel::for_block_ranges(blockwise::block_count(n, unit), o.threads, [&](std::size_t first, std::size_t end) {
    const std::size_t lo = first * unit, hi = std::min(end * unit, n);
    ops.torchao_adam(param.data() + lo, grad.data() + lo, m.data() + lo, v.data() + lo,
                     max_exp_avg_sq ? v_max.data() + lo : nullptr, hi - lo, s);
    if (bf16) {
      for (std::size_t i = lo; i < hi; ++i) param[i] = written(param[i], i, o);
      if (dense)  // the state holds bf16 too (store's round_to), after the parameter used the float32 moments
        for (const std::span<float> values : {m, v, v_max})
          for (std::size_t i = lo; i < std::min(hi, values.size()); ++i) values[i] = round_to(o.param_dtype, values[i]);
    }
  });
  if (dense) return;
  const auto store_fast = [&](Moment& moment, std::span<const float> values) {
    moment.scale.resize(n / o.block_size);
    if (o.kind == TorchaoState::Fp8)
      blockwise::torchao_fp8_quantize_into(values, o.block_size, o.fp8_policy, moment.codes, moment.scale, o.threads);
    else blockwise::torchao_quantize_into(values, moment.qmap, o.block_size, moment.codes, moment.scale, o.threads);
  };
  store_fast(exp_avg, m);
  store_fast(exp_avg_sq, v);
  if (max_exp_avg_sq) store_fast(*max_exp_avg_sq, v_max);
}

}  // namespace lowbit::optimizer
