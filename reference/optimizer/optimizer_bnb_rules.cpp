// bitsandbytes' 8-bit Lion, AdEMAMix, SGD with momentum, RMSprop and Adagrad on the CPU, one element
// at a time in the order of torch's operations (optimizer_bnb_rules.hpp).
#include "lowbit/optimizer_bnb_rules.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "codebook/blockwise_blocks.hpp"
#include "fast/fast_ops.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/parallel_blocks.hpp"
#include "lowbit/torch_cpu_ops.hpp"

namespace lowbit::optimizer {

namespace {

using torch_cpu::add_alpha;
using torch_cpu::addcmul;
using torch_cpu::plus;
using torch_cpu::sign;

void check_sizes(const char* what, std::size_t n, std::size_t grad, std::initializer_list<const Moment*> states) {
  bool ok = grad == n;
  for (const Moment* m : states) ok = ok && m->codes.size() == n;
  if (!ok) throw std::invalid_argument(std::string(what) + ": param, grad and state sizes differ");
}

// The CPU lookup-table quantizer's scalar definition, as bnb_adam_cpu_step requantizes
void requantize(Moment& moment, const std::vector<float>& values, std::size_t block_size) {
  moment.codes.resize(values.size());
  moment.scale.resize(blockwise::block_count(values.size(), block_size));
  blockwise::scalar::bnb_quantize(values, moment.qmap, block_size, blockwise::BnbBackend::CpuLut, true, moment.codes,
                                  moment.scale);
}

std::vector<float> dequantized(const Moment& m, std::size_t block_size) {
  return blockwise::bnb_dequantize(m.codes, m.scale, m.qmap, block_size);
}

}  // namespace

BnbRuleScalars bnb_rule_scalars(const BnbRuleHyper& h) {
  const auto f = [](double x) { return static_cast<float>(x); };
  return {.b1 = f(h.beta1), .w1 = f(1.0 - h.beta1), .b2 = f(h.beta2), .w2 = f(1.0 - h.beta2), .eps = f(h.eps),
          .neg_lr = f(-h.lr), .decay = f(1.0 - h.lr * h.weight_decay), .wd = f(h.weight_decay),
          .decays = h.weight_decay > 0.0, .fused = h.fused};
}

RuleElement bnb_rule_cpu_element(BnbRule rule, float p, float g, float st, std::int64_t step, const BnbRuleScalars& s,
                                 int sqrt_ulps) {
  switch (rule) {
    case BnbRule::Lion: {
      if (s.decays) p = p * s.decay;  // p_fp32.mul_(1 - lr * wd)
      // sign(state1.mul(beta1) + grad.mul(1 - beta1)): three tensors, three roundings
      const float dir = sign(st * s.b1 + g * s.w1);
      p = add_alpha(p, dir, s.neg_lr, s.fused);  // p_fp32.add_(update_dir, alpha=-lr)
      return {p, add_alpha(st * s.b2, g, s.w2, s.fused)};  // state1.mul_(beta2).add_(grad, alpha=1-beta2)
    }
    case BnbRule::Momentum: {
      g = add_alpha(g, p, s.wd, s.fused);  // grad.add_(p_fp32, alpha=weight_decay), even for 0
      st = step == 1 ? g : plus(st * s.b1, g);  // copy_(grad) at step 1, else mul_(beta1).add_(grad)
      return {add_alpha(p, st, s.neg_lr, s.fused), st};
    }
    case BnbRule::Rmsprop:
    case BnbRule::Adagrad: {
      g = add_alpha(g, p, s.wd, s.fused);
      // RMSprop: state1.mul_(alpha).addcmul_(grad, grad, value=1-alpha); Adagrad: addcmul_(.., value=1.0)
      st = rule == BnbRule::Rmsprop ? addcmul(st * s.b1, g, g, s.w1, s.fused) : addcmul(st, g, g, 1.0f, s.fused);
      const float denom = torch_cpu::sqrt(st, sqrt_ulps) + s.eps;  // state1.sqrt().add_(eps)
      return {plus(p, (s.neg_lr * g) / denom), st};  // p_fp32.addcdiv_(grad, denom, value=-lr)
    }
  }
  throw std::invalid_argument("bnb_rule_cpu_element: unknown rule");
}

void scalar::bnb_rule_cpu_step(BnbRule rule, std::span<float> param, std::span<const float> grad, std::int64_t step,
                               Moment& state, const BnbRuleHyper& h, std::size_t block_size) {
  check_sizes("bnb_rule_cpu_step", param.size(), grad.size(), {&state});
  const BnbRuleScalars s = bnb_rule_scalars(h);
  std::vector<float> st = dequantized(state, block_size);
  for (std::size_t i = 0; i < param.size(); ++i) {
    // grad * 1.0f: g.float() * gnorm_scale (it quiets a signalling NaN)
    const RuleElement e = bnb_rule_cpu_element(rule, param[i], grad[i] * 1.0f, st[i], step, s);
    param[i] = e.param;
    st[i] = e.state;
  }
  requantize(state, st, block_size);
}

BnbAdemamixScalars bnb_ademamix_scalars(const BnbAdemamixHyper& h, std::int64_t step) {
  BnbAdemamixScalars s;
  const double t = static_cast<double>(step);
  // Python: min(step * alpha / t_alpha, alpha); min(x, y) keeps x unless y < x
  s.alpha_t = h.alpha;
  if (h.t_alpha != 0) s.alpha_t = std::min(t * h.alpha / static_cast<double>(h.t_alpha), h.alpha);
  s.beta3_t = h.beta3;
  if (h.t_beta3 != 0) {
    const double ln1 = std::log(h.beta1), ln3 = std::log(h.beta3), scale = t / static_cast<double>(h.t_beta3);
    s.beta3_t = std::min(std::exp((ln1 * ln3) / (((1.0 - scale) * ln3) + (scale * ln1))), h.beta3);
  }
  s.b1 = static_cast<float>(h.beta1);
  s.w1 = static_cast<float>(1.0 - h.beta1);
  s.b2 = static_cast<float>(h.beta2);
  s.w2 = static_cast<float>(1.0 - h.beta2);
  s.b3 = static_cast<float>(s.beta3_t);
  s.w3 = static_cast<float>(1.0 - s.beta3_t);
  s.alpha = static_cast<float>(s.alpha_t);
  s.c1 = static_cast<float>(1.0 - std::pow(h.beta1, t));  // Python float ** int
  s.c2 = static_cast<float>(std::sqrt(1.0 - std::pow(h.beta2, t)));
  s.eps = static_cast<float>(h.eps);
  s.neg_lr = static_cast<float>(-h.lr);
  s.decay = static_cast<float>(1.0 - h.lr * h.weight_decay);
  s.decays = h.weight_decay > 0.0;
  s.fused = h.fused;
  return s;
}

AdemamixElement bnb_ademamix_cpu_element(float p, float g, float m1, float m2, float nu, const BnbAdemamixScalars& s,
                                         int sqrt_ulps) {
  m1 = add_alpha(m1 * s.b1, g, s.w1, s.fused);  // m1.mul_(beta1).add_(grad, alpha=1-beta1)
  m2 = add_alpha(m2 * s.b3, g, s.w3, s.fused);  // m2.mul_(beta3).add_(grad, alpha=1-beta3)
  nu = addcmul(nu * s.b2, g, g, s.w2, s.fused);  // nu.mul_(beta2).addcmul_(grad, grad, value=1-beta2)
  // (m1 / c1 + alpha * m2) / (nu.sqrt() / c2 + eps): each operation its own tensor, one rounding each
  const float update = plus(m1 / s.c1, s.alpha * m2) / (torch_cpu::sqrt(nu, sqrt_ulps) / s.c2 + s.eps);
  if (s.decays) p = p * s.decay;
  return {add_alpha(p, update, s.neg_lr, s.fused), m1, m2, nu};  // p_fp32.add_(update, alpha=-lr)
}

void scalar::bnb_ademamix_cpu_step(std::span<float> param, std::span<const float> grad, std::int64_t step, Moment& m1,
                                   Moment& m2, Moment& nu, const BnbAdemamixHyper& h, std::size_t block_size) {
  check_sizes("bnb_ademamix_cpu_step", param.size(), grad.size(), {&m1, &m2, &nu});
  const BnbAdemamixScalars s = bnb_ademamix_scalars(h, step);
  std::vector<float> a = dequantized(m1, block_size), b = dequantized(m2, block_size), c = dequantized(nu, block_size);
  for (std::size_t i = 0; i < param.size(); ++i) {
    const AdemamixElement e = bnb_ademamix_cpu_element(param[i], grad[i] * 1.0f, a[i], b[i], c[i], s);
    param[i] = e.param;
    a[i] = e.m1;
    b[i] = e.m2;
    c[i] = e.nu;
  }
  requantize(m1, a, block_size);
  requantize(m2, b, block_size);
  requantize(nu, c, block_size);
}

// The fast paths, as bnb_adam_cpu_step's (optimizer_bnb.cpp): each thread takes a range of
// consecutive blocks and walks it in chunks of about kChunk elements: the dequantizer's fast path
// writes the states into the thread's buffers, fast_kernels.hpp updates the chunk, and the CPU
// lookup-table quantizer's block loop stores it back into the same codes and absmax. Each element
// alone, each block's absmax and codes from that block alone: the definitions' bytes for any thread
// count and chunk size.
namespace {

constexpr std::size_t kChunk = 8192;  // elements per chunk (at least one block)

// kernel(lo, len, values): values[k] holds state k's dequantized chunk [lo, lo + len), updated in place
void chunked_step(std::size_t n, const std::vector<Moment*>& states, std::size_t block_size, int threads,
                  const std::function<void(std::size_t lo, std::size_t len, const std::vector<std::span<float>>& values)>& kernel) {
  if (threads < 1) throw std::invalid_argument("bnb optimizer step: threads must be at least 1");
  const std::size_t blocks = blockwise::block_count(n, block_size);
  // what the definition's dequantizer and quantizer refuse, before anything changes
  for (const Moment* m : states)
    if (m->scale.size() < blocks) throw std::invalid_argument("too few scales for the codes");
  std::vector<codebook::BnbCpuLut> luts;
  for (const Moment* m : states) luts.emplace_back(m->qmap);
  for (Moment* m : states) m->scale.resize(blocks);
  const std::size_t chunk_blocks = std::max<std::size_t>(1, kChunk / block_size), k = states.size();
  parallel::for_block_ranges(blocks, threads, [&](std::size_t first, std::size_t end) {
    const std::size_t room = std::min(std::min(end - first, chunk_blocks) * block_size, n);
    // not zero-filled: every element is written by the dequantizer before it is read
    const auto storage = std::make_unique_for_overwrite<float[]>(k * room);
    std::vector<std::span<float>> values(k);
    for (std::size_t b = first; b < end; b += chunk_blocks) {
      const std::size_t e = std::min(b + chunk_blocks, end), lo = b * block_size, len = std::min(e * block_size, n) - lo;
      for (std::size_t j = 0; j < k; ++j) {
        values[j] = std::span<float>(storage.get() + j * room, len);
        const Moment& m = *states[j];
        blockwise::bnb_dequantize_into(std::span<const std::uint8_t>(m.codes).subspan(lo, len),
                                       std::span<const float>(m.scale).subspan(b, e - b), m.qmap, block_size, values[j], 1);
      }
      kernel(lo, len, values);
      for (std::size_t j = 0; j < k; ++j)
        blockwise::detail::bnb_lut_quantize_blocks(values[j], luts[j], block_size, states[j]->codes.data() + lo,
                                                   states[j]->scale.data() + b);
    }
  });
}

}  // namespace

void bnb_rule_cpu_step(BnbRule rule, std::span<float> param, std::span<const float> grad, std::int64_t step,
                       Moment& state, const BnbRuleHyper& h, std::size_t block_size, int threads) {
  check_sizes("bnb_rule_cpu_step", param.size(), grad.size(), {&state});
  const BnbRuleScalars s = bnb_rule_scalars(h);
  const fast::Ops& ops = fast::ops();
  chunked_step(param.size(), {&state}, block_size, threads,
               [&](std::size_t lo, std::size_t len, const std::vector<std::span<float>>& v) {
                 ops.bnb_rule(rule, param.data() + lo, grad.data() + lo, v[0].data(), len, step, s);
               });
}

void bnb_ademamix_cpu_step(std::span<float> param, std::span<const float> grad, std::int64_t step, Moment& m1,
                           Moment& m2, Moment& nu, const BnbAdemamixHyper& h, std::size_t block_size, int threads) {
  check_sizes("bnb_ademamix_cpu_step", param.size(), grad.size(), {&m1, &m2, &nu});
  const BnbAdemamixScalars s = bnb_ademamix_scalars(h, step);
  const fast::Ops& ops = fast::ops();
  chunked_step(param.size(), {&m1, &m2, &nu}, block_size, threads,
               [&](std::size_t lo, std::size_t len, const std::vector<std::span<float>>& v) {
                 ops.bnb_ademamix(param.data() + lo, grad.data() + lo, v[0].data(), v[1].data(), v[2].data(), len, s);
               });
}

}  // namespace lowbit::optimizer
