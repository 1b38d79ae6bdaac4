#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "codebook/blockwise_blocks.hpp"
#include "fast/fast_ops.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/optimizer.hpp"
#include "lowbit/parallel_blocks.hpp"

namespace lowbit::optimizer {

BnbAdamScalars bnb_adam_scalars(const BnbAdamHyper& h, std::int64_t step) {
  BnbAdamScalars s;
  s.b1 = static_cast<float>(h.beta1);
  s.w1 = static_cast<float>(1.0 - h.beta1);
  s.b2 = static_cast<float>(h.beta2);
  s.w2 = static_cast<float>(1.0 - h.beta2);
  s.eps = static_cast<float>(h.eps);
  const double c1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));  // Python float ** int
  s.c2 = static_cast<float>(std::sqrt(1.0 - std::pow(h.beta2, static_cast<double>(step))));
  s.step_value = static_cast<float>(-h.lr / c1);
  s.decays = h.weight_decay > 0.0;
  s.decay = static_cast<float>(1.0 - h.lr * h.weight_decay);
  s.fused = h.fused;
  return s;
}

namespace {

void check_step_inputs(std::span<float> param, std::span<const float> grad, const Moment& exp_avg, const Moment& exp_avg_sq) {
  if (grad.size() != param.size() || exp_avg.codes.size() != param.size() || exp_avg_sq.codes.size() != param.size())
    throw std::invalid_argument("bnb_adam_cpu_step: param, grad and state sizes differ");
}

}  // namespace

AdamElement bnb_adam_cpu_element(float p, float g, float m_old, float v_old, const BnbAdamScalars& s,
                                        int sqrt_v_ulps) {
  // mul_(beta1).add_(grad, alpha=1-beta1) and mul_(beta2).addcmul_(grad, grad, value=1-beta2):
  // fused in the vectorized kernels, self + alpha*other and self + (value*t1)*t2 in the scalar ones
  const float m = s.fused ? std::fma(g, s.w1, m_old * s.b1) : m_old * s.b1 + g * s.w1;
  const float v = s.fused ? std::fma(s.w2 * g, g, v_old * s.b2) : v_old * s.b2 + (s.w2 * g) * g;
  float root = std::sqrt(v);
  for (int k = 0; k < std::abs(sqrt_v_ulps); ++k) root = std::nextafter(root, sqrt_v_ulps > 0 ? INFINITY : -INFINITY);
  const float denom = root / s.c2 + s.eps;
  if (s.decays) p = p * s.decay;  // before the update, unlike the CUDA kernel
  return {p + (s.step_value * m) / denom, m, v};
}

void scalar::bnb_adam_cpu_step(std::span<float> param, std::span<const float> grad, std::int64_t step, Moment& exp_avg,
                               Moment& exp_avg_sq, const BnbAdamHyper& h, std::size_t block_size) {
  check_step_inputs(param, grad, exp_avg, exp_avg_sq);
  const BnbAdamScalars s = bnb_adam_scalars(h, step);
  const auto m_old = blockwise::bnb_dequantize(exp_avg.codes, exp_avg.scale, exp_avg.qmap, block_size);
  const auto v_old = blockwise::bnb_dequantize(exp_avg_sq.codes, exp_avg_sq.scale, exp_avg_sq.qmap, block_size);
  std::vector<float> m(param.size()), v(param.size());
  for (std::size_t i = 0; i < param.size(); ++i) {
    const AdamElement e = bnb_adam_cpu_element(param[i], grad[i] * 1.0f, m_old[i], v_old[i], s);
    param[i] = e.param;
    m[i] = e.exp_avg;
    v[i] = e.exp_avg_sq;
  }
  // the quantizer's scalar definition (blockwise.hpp), so that the fast step is held to it
  auto requantize = [block_size](Moment& moment, const std::vector<float>& values) {
    moment.codes.resize(values.size());
    moment.scale.resize(blockwise::block_count(values.size(), block_size));
    blockwise::scalar::bnb_quantize(values, moment.qmap, block_size, blockwise::BnbBackend::CpuLut, true, moment.codes,
                                    moment.scale);
  };
  requantize(exp_avg, m);
  requantize(exp_avg_sq, v);
}

// The fast path: the definition's stages in one pass over memory, on `threads` threads. Each thread
// takes a range of consecutive blocks and walks it in chunks of about kChunk elements: the
// dequantizer's fast path writes both moments into the thread's buffers (allocated once per step,
// small enough to stay in cache), fast_kernels.hpp bnb_adam_span updates the chunk, and the CPU
// lookup-table quantizer's block loop (blockwise_blocks.hpp, its tables built once per step) stores
// it back into the same codes and absmax. Each element alone, each block's absmax and codes from that
// block alone: the definition's bytes for any thread count and chunk size.
namespace {
constexpr std::size_t kChunk = 8192;  // elements per chunk (at least one block)
}  // namespace

void bnb_adam_cpu_step(std::span<float> param, std::span<const float> grad, std::int64_t step, Moment& exp_avg,
                       Moment& exp_avg_sq, const BnbAdamHyper& h, std::size_t block_size, int threads) {
  check_step_inputs(param, grad, exp_avg, exp_avg_sq);
  if (threads < 1) throw std::invalid_argument("bnb_adam_cpu_step: threads must be at least 1");
  const std::size_t n = param.size(), blocks = blockwise::block_count(n, block_size);
  // what the definition's dequantizer and quantizer refuse, before anything changes
  if (exp_avg.scale.size() < blocks || exp_avg_sq.scale.size() < blocks)
    throw std::invalid_argument("too few scales for the codes");
  const codebook::BnbCpuLut lut_m(exp_avg.qmap), lut_v(exp_avg_sq.qmap);
  const BnbAdamScalars s = bnb_adam_scalars(h, step);
  exp_avg.scale.resize(blocks);
  exp_avg_sq.scale.resize(blocks);
  const std::size_t chunk_blocks = std::max<std::size_t>(1, kChunk / block_size);
  const fast::Ops& ops = fast::ops();
  parallel::for_block_ranges(blocks, threads, [&](std::size_t first, std::size_t end) {
    const std::size_t room = std::min(std::min(end - first, chunk_blocks) * block_size, n);
    // not zero-filled: every element is written by the dequantizer before it is read
    const auto storage = std::make_unique_for_overwrite<float[]>(2 * room);
    const std::span<float> m_all(storage.get(), room), v_all(storage.get() + room, room);
    for (std::size_t b = first; b < end; b += chunk_blocks) {
      const std::size_t e = std::min(b + chunk_blocks, end), lo = b * block_size, len = std::min(e * block_size, n) - lo;
      const std::span<float> m = m_all.first(len), v = v_all.first(len);
      for (auto [moment, values] : {std::pair{&exp_avg, m}, {&exp_avg_sq, v}})
        blockwise::bnb_dequantize_into(std::span<const std::uint8_t>(moment->codes).subspan(lo, len),
                                       std::span<const float>(moment->scale).subspan(b, e - b), moment->qmap, block_size,
                                       values, 1);
      ops.bnb_adam(param.data() + lo, grad.data() + lo, m.data(), v.data(), len, s);
      blockwise::detail::bnb_lut_quantize_blocks(m, lut_m, block_size, exp_avg.codes.data() + lo, exp_avg.scale.data() + b);
      blockwise::detail::bnb_lut_quantize_blocks(v, lut_v, block_size, exp_avg_sq.codes.data() + lo,
                                                 exp_avg_sq.scale.data() + b);
    }
  });
}

}  // namespace lowbit::optimizer
