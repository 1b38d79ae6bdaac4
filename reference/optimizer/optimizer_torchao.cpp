// torchao's Adam/AdamW step on low-bit and dense states (optimizer.hpp; docs/formats/torchao-adam.md).
#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "codebook/blockwise_blocks.hpp"
#include "fast/fast_ops.hpp"
#include "lowbit/bf16_round.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/optimizer.hpp"
#include "lowbit/parallel_blocks.hpp"

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

// The value a tensor of the parameter's dtype holds after copy_(x): a bf16 NaN by torch's vectorized
// or scalar conversion (options.vectorized_copies).
float round_to(const TorchaoAdamOptions& o, float x) {
  if (o.param_dtype != ParamDtype::BFloat16) return x;
  return widen_bf16(o.vectorized_copies ? bf16_round_nearest_even(x) : bf16_round_nearest_even_c10(x));
}

// exp_avg.copy_(values): requantize a low-bit state with a fresh scale, or store a dense one.
void store(Moment& m, std::span<const float> values, const TorchaoAdamOptions& o) {
  if (o.kind == TorchaoState::Dense) {
    m.values.resize(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) m.values[i] = round_to(o, values[i]);
    return;
  }
  // the quantizers' scalar definitions (blockwise.hpp), so that the fast step is held to them
  m.codes.resize(values.size());
  m.scale.resize(blockwise::block_count(values.size(), o.block_size));
  if (o.kind == TorchaoState::Fp8) blockwise::scalar::torchao_fp8_quantize(values, o.block_size, o.fp8_policy, m.codes, m.scale);
  else blockwise::scalar::torchao_quantize(values, m.qmap, o.block_size, m.codes, m.scale);
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
  return o.stochastic_round_random.empty()
             ? round_to(o, p32)
             : widen_bf16(bf16_stochastic_round(p32, o.stochastic_round_random[i], o.vectorized_copies));
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
  // the unquantized moments update the parameter, p_f32 - u as torch's sub computes it
  return {torch_sub(p, (s.lr * (m / s.bc1)) / denom), m, v, v_max};
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
// The definition's stages in one pass over memory, on options.threads threads: each thread takes a
// range of consecutive whole blocks and walks it in chunks of about kChunk elements; per chunk the
// block-wise fast paths dequantize the moments into the thread's buffers (allocated once per step,
// small enough to stay in cache), the vector kernel (fast_kernels.hpp torchao_adam_span) updates the
// chunk, and the quantizers' block loops (blockwise_blocks.hpp, with the search table a whole-array
// call would use) store it back into the same codes and scales. A dense state is updated in place.
// The bf16 write-back (and stochastic rounding) and a bf16 dense state's rounding stay scalar, per
// element, in the same threads: integer bit work on one element at a time, not worth a kernel. No
// element depends on another, and each block's scale and codes on that block alone, so the bytes are
// the definition's for any thread count and chunk size.

namespace {

constexpr std::size_t kChunk = 8192;  // elements per chunk of a quantized state (at least one block)
constexpr std::size_t kDenseRange = 16384;  // a dense state has no blocks: the threads split it in these

// What the definition's dequantizers and quantizers would refuse, checked before anything changes
// (the fast path's threads must not throw).
void check_quantized_layout(std::size_t n, const Moment& m, const TorchaoAdamOptions& o) {
  if (o.block_size == 0) throw std::invalid_argument("block size must be positive");
  if (n % o.block_size != 0)
    throw std::invalid_argument("torchao quantizes whole blocks only: " + std::to_string(n) +
                                " elements is not a multiple of block size " + std::to_string(o.block_size));
  if (m.scale.size() < n / o.block_size) throw std::invalid_argument("too few scales for the codes");
  if (o.kind == TorchaoState::Codebook && n > 0 && m.qmap.size() != 16 && m.qmap.size() != 256)
    throw std::invalid_argument("torchao_search: qmap must have 16 or 256 entries");
}

// One moment's blocks [first, end) through the chunk: dequantized into `values`, and back.
struct ChunkStore {
  Moment* moment;
  const TorchaoAdamOptions* o;
  const std::int32_t* buckets;  // codebook states' search table, or null

  void load(std::size_t first, std::size_t end, std::span<float> values) const {
    const std::size_t b = o->block_size, lo = first * b, len = (end - first) * b;
    const auto codes = std::span<const std::uint8_t>(moment->codes).subspan(lo, len);
    const auto scale = std::span<const float>(moment->scale).subspan(first, end - first);
    if (o->kind == TorchaoState::Fp8)
      blockwise::torchao_fp8_dequantize_into(codes, scale, b, blockwise::NanWidening::Payload, values.first(len), 1);
    else blockwise::torchao_dequantize_into(codes, scale, moment->qmap, b, values.first(len), 1);
  }
  void store(std::size_t first, std::size_t end, std::span<const float> values) const {
    const std::size_t b = o->block_size, lo = first * b, len = (end - first) * b;
    if (o->kind == TorchaoState::Fp8)
      blockwise::torchao_fp8_quantize_into(values.first(len), b, o->fp8_policy, std::span(moment->codes).subspan(lo, len),
                                           std::span(moment->scale).subspan(first, end - first), 1);
    else blockwise::detail::torchao_quantize_blocks(values.first(len), moment->qmap, b, buckets, moment->codes.data() + lo,
                                                    moment->scale.data() + first);
  }
};

}  // namespace

void torchao_adam_step(std::span<float> param, std::span<const float> grad, float& step, Moment& exp_avg,
                       Moment& exp_avg_sq, Moment* max_exp_avg_sq, const AdamHyper& h, const TorchaoAdamOptions& o) {
  const std::size_t n = param.size();
  check_step_inputs(n, grad.size(), exp_avg, exp_avg_sq, max_exp_avg_sq, o);
  if (o.threads < 1) throw std::invalid_argument("torchao_adam_step: threads must be at least 1");
  const bool dense = o.kind == TorchaoState::Dense;
  std::vector<Moment*> moments = {&exp_avg, &exp_avg_sq};
  if (max_exp_avg_sq) moments.push_back(max_exp_avg_sq);
  if (!dense)
    for (const Moment* m : moments) check_quantized_layout(n, *m, o);
  step += 1.0f;
  const TorchaoAdamScalars s = torchao_adam_scalars(h, step);
  const fast::Ops& ops = fast::ops();
  const bool bf16 = o.param_dtype == ParamDtype::BFloat16;
  const auto write_back = [&](std::size_t lo, std::size_t hi) {
    if (bf16)
      for (std::size_t i = lo; i < hi; ++i) param[i] = written(param[i], i, o);
  };

  if (dense) {  // in place, the moments' own values
    parallel::for_block_ranges(blockwise::block_count(n, kDenseRange), o.threads, [&](std::size_t first, std::size_t end) {
      const std::size_t lo = first * kDenseRange, hi = std::min(end * kDenseRange, n);
      ops.torchao_adam(param.data() + lo, grad.data() + lo, exp_avg.values.data() + lo, exp_avg_sq.values.data() + lo,
                       max_exp_avg_sq ? max_exp_avg_sq->values.data() + lo : nullptr, hi - lo, s);
      write_back(lo, hi);
      if (bf16)  // the state holds bf16 too (store's round_to), after the parameter used the float32 moments
        for (Moment* m : moments)
          for (std::size_t i = lo; i < hi; ++i) m->values[i] = round_to(o, m->values[i]);
    });
    return;
  }

  const std::size_t blocks = n / o.block_size, chunk_blocks = std::max<std::size_t>(1, kChunk / o.block_size);
  std::vector<std::shared_ptr<const std::vector<std::int32_t>>> tables;  // kept alive for the step
  std::vector<ChunkStore> stores;
  for (Moment* m : moments) {
    m->scale.resize(blocks);  // the definition's store leaves one scale per block
    const auto table = o.kind == TorchaoState::Codebook ? blockwise::detail::search_buckets(m->qmap, n, o.threads) : nullptr;
    tables.push_back(table);
    stores.push_back({m, &o, table ? table->data() : nullptr});
  }
  parallel::for_block_ranges(blocks, o.threads, [&](std::size_t first, std::size_t end) {
    const std::size_t room = std::min(end - first, chunk_blocks) * o.block_size;
    // one buffer per moment, not zero-filled: every element is written by the dequantizer before it is read
    const auto storage = std::make_unique_for_overwrite<float[]>(room * stores.size());
    const auto buffer = [&](std::size_t k) { return std::span<float>(storage.get() + k * room, room); };
    for (std::size_t b = first; b < end; b += chunk_blocks) {
      const std::size_t e = std::min(b + chunk_blocks, end), lo = b * o.block_size, hi = e * o.block_size;
      for (std::size_t k = 0; k < stores.size(); ++k) stores[k].load(b, e, buffer(k));
      ops.torchao_adam(param.data() + lo, grad.data() + lo, buffer(0).data(), buffer(1).data(),
                       max_exp_avg_sq ? buffer(2).data() : nullptr, hi - lo, s);
      write_back(lo, hi);
      for (std::size_t k = 0; k < stores.size(); ++k) stores[k].store(b, e, buffer(k));
    }
  });
}

}  // namespace lowbit::optimizer
