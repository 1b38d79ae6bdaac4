// The fast steps of bitsandbytes' other 8-bit rules (optimizer_bnb_rules.hpp bnb_rule_cpu_step and
// bnb_ademamix_cpu_step: the block-wise fast paths, the vector element kernels of fast_kernels.hpp,
// threads) against their scalar definitions (optimizer::scalar), byte for byte: the parameter's bits,
// every code and the bits of every absmax, for every instruction set the CPU has and 1, 2, 3 and 7
// threads, three steps in a row (each from the definition's state after the one before), on ragged
// sizes (partial tail blocks, fewer blocks than threads, several chunks per thread) and values mixed
// with NaNs of random payloads and signs, signed zeros, infinities and random bit patterns, in the
// parameter, the gradient and the absmax; fused and unfused arithmetic, with and without decay.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "fast_path_fixture.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"
#include "lowbit/simd_level.hpp"

using namespace lowbit;
using namespace lowbit::test;
using optimizer::Moment;

namespace {

float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// One value of a hostile mix: mostly normal(0, scale), else a NaN (quiet or signalling, any sign and
// payload), a signed zero, an infinity or any bit pattern.
float hostile(std::mt19937_64& rng, float scale) {
  const auto u = static_cast<std::uint32_t>(rng());
  const int kind = static_cast<int>(rng() % 16);
  if (kind == 0) return bits_to_float(0x7F800001u | (u & 0x807FFFFFu));
  if (kind == 1) return bits_to_float(u & 0x80000000u);
  if (kind == 2) return bits_to_float((u & 0x80000000u) | 0x7F800000u);
  if (kind == 3) return bits_to_float(u);
  return std::normal_distribution<float>(0.0f, scale)(rng);
}

std::vector<float> hostile_values(std::size_t n, std::mt19937_64& rng, float scale) {
  std::vector<float> x(n);
  for (float& v : x) v = hostile(rng, scale);
  return x;
}

// A quantized state as a step finds it: random codes, and absmax values that are mostly ordinary
// (some zero, some non-finite or any bits).
Moment hostile_moment(std::size_t n, const std::vector<float>& qmap, std::mt19937_64& rng) {
  Moment m;
  m.qmap = qmap;
  m.codes.resize(n);
  for (std::uint8_t& c : m.codes) c = static_cast<std::uint8_t>(rng());
  m.scale.resize((n + 255) / 256);
  for (float& s : m.scale) s = rng() % 4 == 0 ? hostile(rng, 1.0f) : std::ldexp(static_cast<float>(rng() % 1000 + 1), -12);
  return m;
}

std::string first_difference(const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return what + ": sizes differ";
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], 4) != 0) return what + "[" + std::to_string(i) + "]: fast " + bits(got[i]) + ", scalar " + bits(want[i]);
  return {};
}

std::string state_difference(const std::string& what, const Moment& got, const Moment& want) {
  if (got.codes != want.codes) {
    std::size_t i = 0;
    while (i < got.codes.size() && i < want.codes.size() && got.codes[i] == want.codes[i]) ++i;
    return what + ".codes differ first at " + std::to_string(i);
  }
  return first_difference(what + ".scale", got.scale, want.scale);
}

struct Start {
  std::vector<float> param;
  std::vector<std::vector<float>> grads;  // one a step
  std::vector<Moment> states;
  std::int64_t step = 1;
};

// Runs `steps` steps from start through `fast` (at every level and thread count) and through `scalar`
// once, comparing after each step; returns how many comparisons were made.
using StepFn = std::function<void(std::vector<float>& param, const std::vector<float>& grad, std::int64_t step,
                                  std::vector<Moment>& states, int threads)>;
int compare_steps(const std::string& name, const Start& start, const StepFn& fast, const StepFn& scalar) {
  int compared = 0;
  std::vector<float> want_param = start.param;
  std::vector<Moment> want_states = start.states;
  for (std::size_t k = 0; k < start.grads.size(); ++k) {
    const std::int64_t step = start.step + static_cast<std::int64_t>(k);
    std::vector<float> from_param = want_param;
    const std::vector<Moment> from_states = want_states;
    scalar(want_param, start.grads[k], step, want_states, 1);
    for (simd::Level level : levels()) {
      PinnedLevel pinned(level);
      for (int threads : kThreadCounts) {
        CAPTURE(name);
        CAPTURE(simd::level_name(level));
        CAPTURE(threads);
        CAPTURE(step);
        std::vector<float> param = from_param;
        std::vector<Moment> states = from_states;
        fast(param, start.grads[k], step, states, threads);
        std::string d = first_difference("param", param, want_param);
        for (std::size_t j = 0; d.empty() && j < states.size(); ++j)
          d = state_difference("state " + std::to_string(j), states[j], want_states[j]);
        CHECK_MESSAGE(d.empty(), d);
        ++compared;
      }
    }
  }
  return compared;
}

constexpr std::size_t kSizes[] = {0, 5, 256 * 9 + 17, 8192, 8192 * 3 + 300};

}  // namespace

TEST_CASE("fast bitsandbytes Lion, momentum, RMSprop and Adagrad steps equal the scalar definitions") {
  std::mt19937_64 rng(2901);
  const std::vector<float> dyn = codebook::signed8();
  int compared = 0;
  for (optimizer::BnbRule rule : {optimizer::BnbRule::Lion, optimizer::BnbRule::Momentum, optimizer::BnbRule::Rmsprop,
                                  optimizer::BnbRule::Adagrad})
    for (std::size_t n : kSizes)
      for (bool fused : {true, false})
        for (double wd : {0.0, 0.01}) {
          optimizer::BnbRuleHyper h{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = wd, .fused = fused};
          Start s;
          s.param = hostile_values(n, rng, 1.0f);
          s.states = {hostile_moment(n, dyn, rng)};
          s.step = rule == optimizer::BnbRule::Momentum ? 1 : 1 + static_cast<std::int64_t>(rng() % 3);  // momentum: the copy too
          for (int k = 0; k < 3; ++k) s.grads.push_back(hostile_values(n, rng, 1e-2f));
          const std::string name = "rule " + std::to_string(static_cast<int>(rule)) + ", " + std::to_string(n) +
                                   " elements" + (fused ? "" : ", unfused") + (wd > 0 ? ", decay" : "");
          compared += compare_steps(
              name, s,
              [&](std::vector<float>& p, const std::vector<float>& g, std::int64_t step, std::vector<Moment>& st, int threads) {
                optimizer::bnb_rule_cpu_step(rule, p, g, step, st[0], h, 256, threads);
              },
              [&](std::vector<float>& p, const std::vector<float>& g, std::int64_t step, std::vector<Moment>& st, int) {
                optimizer::scalar::bnb_rule_cpu_step(rule, p, g, step, st[0], h, 256);
              });
        }
  CHECK(compared == 4 * 5 * 2 * 2 * 3 * static_cast<int>(levels().size()) * 4);
}

TEST_CASE("fast bitsandbytes AdEMAMix steps equal the scalar definition, schedulers on and off") {
  std::mt19937_64 rng(2902);
  const std::vector<float> dyn = codebook::signed8(),
                           udyn = codebook::unsigned8();
  int compared = 0;
  for (std::size_t n : kSizes)
    for (bool fused : {true, false})
      for (std::int64_t t : {0, 2}) {
        const optimizer::BnbAdemamixHyper h{.weight_decay = t ? 0.0 : 1e-2, .t_alpha = t, .t_beta3 = t + 1, .fused = fused};
        Start s;
        s.param = hostile_values(n, rng, 1.0f);
        s.states = {hostile_moment(n, dyn, rng), hostile_moment(n, dyn, rng), hostile_moment(n, udyn, rng)};
        s.step = 1 + static_cast<std::int64_t>(rng() % 3);
        for (int k = 0; k < 3; ++k) s.grads.push_back(hostile_values(n, rng, 1e-2f));
        const std::string name = "AdEMAMix, " + std::to_string(n) + " elements" + (fused ? "" : ", unfused") +
                                 (t ? ", schedulers" : ", decay");
        compared += compare_steps(
            name, s,
            [&](std::vector<float>& p, const std::vector<float>& g, std::int64_t step, std::vector<Moment>& st, int threads) {
              optimizer::bnb_ademamix_cpu_step(p, g, step, st[0], st[1], st[2], h, 256, threads);
            },
            [&](std::vector<float>& p, const std::vector<float>& g, std::int64_t step, std::vector<Moment>& st, int) {
              optimizer::scalar::bnb_ademamix_cpu_step(p, g, step, st[0], st[1], st[2], h, 256);
            });
      }
  CHECK(compared == 5 * 2 * 2 * 3 * static_cast<int>(levels().size()) * 4);
}

TEST_CASE("the fast rule steps refuse a thread count below 1 and too few absmax values before they change anything") {
  std::vector<float> param(300, 1.0f), grad(300, 0.5f);
  Moment m;
  m.qmap = codebook::signed8();
  m.codes.assign(300, 7);
  m.scale.assign(2, 1.0f);
  const Moment before = m;
  CHECK_THROWS_AS(optimizer::bnb_rule_cpu_step(optimizer::BnbRule::Lion, param, grad, 1, m, {}, 256, 0), std::invalid_argument);
  m.scale.resize(1);
  CHECK_THROWS_AS(optimizer::bnb_rule_cpu_step(optimizer::BnbRule::Lion, param, grad, 1, m, {}, 256, 2), std::invalid_argument);
  CHECK(param == std::vector<float>(300, 1.0f));
  CHECK(m.codes == before.codes);
}
