// bitsandbytes' one-state CUDA kernel for Lion, SGD with momentum, RMSprop and Adagrad
// (bnb.lion8bit.cuda, bnb.momentum8bit.cuda, bnb.rmsprop8bit.cuda, bnb.adagrad8bit.cuda: IEEE models):
// the behaviours its source shows (bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise
// at 95f9af30, as the formats' pages under docs/formats/ state them) that set each apart from its CPU
// format and from Adam's CUDA kernel. No GPU here: the expected values are worked out from the source by
// hand, never taken from running the reference.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <vector>

#include "bits_printer.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"

using namespace lowbit;
using namespace lowbit::test;
using optimizer::BnbRule;

namespace {

struct RuleRun {
  std::vector<float> param;
  optimizer::Moment m;
  std::int64_t steps = 0;
};

// n parameters of 1.0 and bitsandbytes' fresh state (codes 0, absmax 0, its signed dynamic map, which
// Optimizer1State gives every rule).
RuleRun fresh(std::size_t n) {
  RuleRun r{std::vector<float>(n, 1.0f), {}};
  r.m.codes.assign(n, 0);
  r.m.scale.assign((n + 255) / 256, 0.0f);
  r.m.qmap = codebook::dynamic_map(true, 7, 8, codebook::Linspace::Fma, true);
  return r;
}

// beta1: momentum or RMSprop's alpha.
void step(BnbRule rule, RuleRun& r, const std::vector<float>& grad, double lr, double beta1, double wd, double eps = 0.0) {
  optimizer::BnbRuleHyper h;
  h.lr = lr;
  h.beta1 = beta1;
  h.beta2 = 0.0;
  h.eps = eps;
  h.weight_decay = wd;
  optimizer::bnb_rule_cuda_step(rule, r.param, grad, ++r.steps, r.m, h);
}

void lion_step(RuleRun& r, const std::vector<float>& grad, double lr = 1e-4, double wd = 0.0) {
  optimizer::BnbRuleHyper h;  // betas 0.9 / 0.99: Lion8bit's defaults
  h.lr = lr;
  h.weight_decay = wd;
  optimizer::bnb_rule_cuda_step(BnbRule::Lion, r.param, grad, ++r.steps, r.m, h);
}

}  // namespace

// ---- Lion ----------------------------------------------------------------------------------------

TEST_CASE("bnb Lion CUDA: 1 - beta2 is float32 arithmetic on the float32 beta") {
  RuleRun r = fresh(256);
  lion_step(r, std::vector<float>(256, 1.0f));
  // a fresh state dequantizes to -0 (q[0] = -1 times absmax 0): the new state is (1.0f - 0.99f) * 1,
  // 0x3C23D700, where the CPU's f32(1 - 0.99) is 0x3C23D70A
  CHECK(bits(r.m.scale[0]) == f32_bits(0x3C23D700u));
  CHECK(code(r.m.codes[0], r.m.qmap) == code(255, r.m.qmap));
  // the sign of (1.0f - 0.9f) * 1 is +1: the parameter moves by lr
  CHECK(bits(r.param[0]) == bits(1.0f - 1e-4f));
}

TEST_CASE("bnb Lion CUDA: decoupled weight decay before the update") {
  RuleRun r = fresh(256);
  lion_step(r, std::vector<float>(256, 1.0f), 0.5, 0.5);
  // p = 1 * (1 - 0.5 * 0.5) - 0.5 * sign(+) = 0.25; decayed after the update it would be 0.375
  CHECK(bits(r.param[0]) == bits(0.25f));
}

TEST_CASE("bnb Lion CUDA: NaN and Inf gradients are not reset; sign of NaN is 0; NaN states get code 255") {
  std::vector<float> grad(300, 0.25f);
  grad[10] = NAN;
  grad[11] = INFINITY;
  grad[12] = -INFINITY;
  RuleRun r = fresh(300);
  lion_step(r, grad, 1e-4, 0.01);
  const float decay = std::fma(-1e-4f, 0.01f, 1.0f);
  CHECK(bits(r.param[10]) == bits(1.0f * decay));  // sgn(NaN) = 0: only the decay
  CHECK(bits(r.param[11]) == bits(1.0f * decay - 1e-4f));
  CHECK(bits(r.param[12]) == bits(1.0f * decay + 1e-4f));
  // the states are NaN, +Inf, -Inf (Adam's two-state kernel would reset them to 0): fmax passes over
  // the NaN, takes the Infs, so block 0's absmax is +Inf
  CHECK(bits(r.m.scale[0]) == bits(INFINITY));
  // NaN / Inf = NaN and Inf / Inf = NaN search to code 0 (-1); the sign fix moves a NaN (the GPU's is
  // positive) and +Inf up one code: 0 - 1 wraps to 255 for the NaN, 0 + 1 = 1 for +Inf; -Inf keeps 0
  CHECK(code(r.m.codes[10], r.m.qmap) == code(255, r.m.qmap));
  CHECK(code(r.m.codes[11], r.m.qmap) == code(1, r.m.qmap));
  CHECK(code(r.m.codes[12], r.m.qmap) == code(0, r.m.qmap));
  CHECK(std::isfinite(r.m.scale[1]));  // the second block's gradients are finite
}

TEST_CASE("bnb Lion CUDA: the tail block's padding slots enter the new absmax") {
  // 256 + 17 elements. Step 1: one tail element moves (gradient 0.5), the others stay +0. Step 2: that
  // element's gradient is NaN (fmax passes over its NaN state) and the other tail states are 0, so the
  // tail's absmax is the padding's alone: code 128 scaled by the old absmax, times beta2 (+ (1 - b2) * 0).
  std::vector<float> grad(273, 0.0f);
  grad[256] = 0.5f;
  RuleRun r = fresh(273);
  lion_step(r, grad);
  const float old_absmax = r.m.scale[1];
  REQUIRE(value(old_absmax) > value(0.0f));
  grad[256] = NAN;
  lion_step(r, grad);
  CHECK(bits(r.m.scale[1]) == bits(r.m.qmap[128] * old_absmax * 0.99f));
  CHECK(code(r.m.codes[256], r.m.qmap) == code(255, r.m.qmap));  // its NaN state
}

TEST_CASE("bnb Lion CUDA: an all-zero block's codes wrap to 255, an all -0 block keeps 0") {
  RuleRun zeros = fresh(256);
  lion_step(zeros, std::vector<float>(256, 0.0f));  // s = +0, absmax 0: 0 / 0 -> code 0, 0 - 1 = 255
  CHECK(value(zeros.m.scale[0]) == value(0.0f));
  for (std::uint8_t c : zeros.m.codes) CHECK(code(c, zeros.m.qmap) == code(255, zeros.m.qmap));
  RuleRun negative = fresh(256);
  lion_step(negative, std::vector<float>(256, -0.0f));  // s = -0 matches q[0]'s sign
  for (std::uint8_t c : negative.m.codes) CHECK(code(c, negative.m.qmap) == code(0, negative.m.qmap));
}

// ---- momentum -------------------------------------------------------------------------------------

TEST_CASE("bnb momentum CUDA: step 1 copies the gradient, step 2 is fma(buf, momentum, g) without dampening") {
  RuleRun r = fresh(256);
  step(BnbRule::Momentum, r, std::vector<float>(256, 0.5f), 0.5, 0.9, 0.0);
  // step 1: buf = g = 0.5 (the old state, -0, is not read); p = 1 - 0.5 * 0.5 = 0.75; absmax 0.5, code 255 (+1)
  CHECK(bits(r.param[0]) == bits(0.75f));
  CHECK(bits(r.m.scale[0]) == bits(0.5f));
  CHECK(code(r.m.codes[0], r.m.qmap) == code(255, r.m.qmap));
  step(BnbRule::Momentum, r, std::vector<float>(256, 0.5f), 0.5, 0.9, 0.0);
  // step 2: buf0 = q[255] * 0.5 = 0.5; buf = 0.5 * f32(0.9) + 0.5: f32(0.9) = 15099494 * 2^-24, so
  // buf = (7549747 + 8388608) * 2^-24, exact. With dampening ((1 - m) g) it would be 0.5.
  const float buf = std::ldexp(15938355.0f, -24);
  CHECK(bits(r.m.scale[0]) == bits(buf));
  // p = 0.75 - 0.5 * buf = (25165824 - 15938355) * 2^-25 = 9227469 * 2^-25, exact
  CHECK(bits(r.param[0]) == bits(std::ldexp(9227469.0f, -25)));
}

TEST_CASE("bnb momentum CUDA: the L2 term only when weight_decay > 0, so a -0 gradient stays -0") {
  RuleRun decayed = fresh(256);
  step(BnbRule::Momentum, decayed, std::vector<float>(256, 0.5f), 0.5, 0.9, 0.5);
  // g = 0.5 + 1 * 0.5 = 1 (step 1 copies it); p = 1 - 0.5 * 1 = 0.5
  CHECK(bits(decayed.param[0]) == bits(0.5f));
  CHECK(bits(decayed.m.scale[0]) == bits(1.0f));
  // wd = 0: the kernel adds nothing (the CPU adds 0 * p, turning -0 into +0). buf = -0 everywhere:
  // absmax fmax(-FLT_MAX, +0) = +0, -0 / +0 = NaN searches to code 0 (-1), whose sign is -0's: code 0
  // stays (the CPU's +0 would wrap to 255)
  RuleRun plain = fresh(256);
  step(BnbRule::Momentum, plain, std::vector<float>(256, -0.0f), 0.5, 0.9, 0.0);
  CHECK(bits(plain.m.scale[0]) == bits(0.0f));
  CHECK(code(plain.m.codes[0], plain.m.qmap) == code(0, plain.m.qmap));
  CHECK(bits(plain.param[0]) == bits(1.0f));  // 1 - 0.5 * -0
}

TEST_CASE("bnb momentum CUDA: no NaN/Inf reset; the tail's padding enters the absmax from step 2") {
  // 256 + 1 elements. Step 1: the tail element's gradient 0.5 makes its block's absmax 0.5 (the
  // padding's buffers are copies of gradient 0). Step 2: its gradient is NaN, so its buffer and
  // parameter are NaN (the GPU's 0x7FFFFFFF; Adam's two-state kernel would reset), fmax passes over it,
  // and the absmax is the padding's q[128] * 0.5 * f32(0.9) + 0 (q[128] * 0.5 exact: one rounding).
  std::vector<float> grad(257, 0.25f);
  grad[256] = 0.5f;
  RuleRun r = fresh(257);
  step(BnbRule::Momentum, r, grad, 0.5, 0.9, 0.0);
  REQUIRE(bits(r.m.scale[1]) == bits(0.5f));
  grad[256] = NAN;
  grad[0] = INFINITY;
  step(BnbRule::Momentum, r, grad, 0.5, 0.9, 0.0);
  REQUIRE(value(r.m.qmap[128]) > value(0.0f));
  CHECK(bits(r.m.scale[1]) == bits(r.m.qmap[128] * 0.5f * 0.9f));
  CHECK(bits(r.param[256]) == f32_bits(0x7FFFFFFFu));
  CHECK(code(r.m.codes[256], r.m.qmap) == code(255, r.m.qmap));  // NaN searches to 0, 0 - 1 wraps
  // the Inf: buffer +Inf, block 0's absmax +Inf, parameter -Inf; +Inf / +Inf = NaN -> code 0, then +1
  CHECK(bits(r.m.scale[0]) == bits(INFINITY));
  CHECK(bits(r.param[0]) == bits(-INFINITY));
  CHECK(code(r.m.codes[0], r.m.qmap) == code(1, r.m.qmap));
}

// ---- RMSprop --------------------------------------------------------------------------------------

TEST_CASE("bnb RMSprop CUDA: 1 - alpha in float32, eps added to sqrt(s)") {
  RuleRun r = fresh(256);
  step(BnbRule::Rmsprop, r, std::vector<float>(256, 1.0f), 1e-2, 0.99, 0.0, 1e-8);
  // a fresh state is -0: s = (1.0f - 0.99f) * (1 * 1) = 0x3C23D700, where the CPU's f32(1 - 0.99) is
  // 0x3C23D70A; every slot alike, so it is the absmax and each code 255
  CHECK(bits(r.m.scale[0]) == f32_bits(0x3C23D700u));
  CHECK(code(r.m.codes[0], r.m.qmap) == code(255, r.m.qmap));
  // alpha 0.75 (1 - alpha = 0.25), g = 2: s = 0.25 * 4 = 1; eps 1 outside the root: 2 / (1 + 1) = 1,
  // p = 1 - 0.5 * 1 = 0.5 (under the root it would be 2 / sqrt(2))
  RuleRun e = fresh(256);
  step(BnbRule::Rmsprop, e, std::vector<float>(256, 2.0f), 0.5, 0.75, 0.0, 1.0);
  CHECK(bits(e.m.scale[0]) == bits(1.0f));
  CHECK(bits(e.param[0]) == bits(0.5f));
  // step 2: s = fma(q[255] * 1, 0.75, 0.25 * 4) = 1.75
  step(BnbRule::Rmsprop, e, std::vector<float>(256, 2.0f), 0.5, 0.75, 0.0, 1.0);
  CHECK(bits(e.m.scale[0]) == bits(1.75f));
}

// ---- Adagrad --------------------------------------------------------------------------------------

TEST_CASE("bnb Adagrad CUDA: the sum of squares, eps added to sqrt(s)") {
  RuleRun r = fresh(256);
  step(BnbRule::Adagrad, r, std::vector<float>(256, 2.0f), 0.5, 0.0, 0.0, 2.0);
  // a fresh state is -0: s = 2 * 2 + -0 = 4, the absmax; p = 1 - 0.5 * 2 / (sqrt(4) + 2) = 0.75 (eps
  // under the root it would be 2 / sqrt(6))
  CHECK(bits(r.m.scale[0]) == bits(4.0f));
  CHECK(code(r.m.codes[0], r.m.qmap) == code(255, r.m.qmap));
  CHECK(bits(r.param[0]) == bits(0.75f));
  // step 2: s = 2 * 2 + q[255] * 4 = 8
  step(BnbRule::Adagrad, r, std::vector<float>(256, 2.0f), 0.5, 0.0, 0.0, 2.0);
  CHECK(bits(r.m.scale[0]) == bits(8.0f));
}

// ---- RMSprop and Adagrad ---------------------------------------------------------------------------

TEST_CASE("bnb RMSprop and Adagrad CUDA: the L2 term enters the state, the parameter divides the plain gradient") {
  // p = 2, g = 1, wd 0.5, eps 0, lr 0.25: g' = 1 + 2 * 0.5 = 2. RMSprop (alpha 0.75): s = 0.25 * 4 = 1,
  // p = 2 - 0.25 * (1 / 1) = 1.75 where the CPU (g' in the numerator too) has 2 - 0.25 * 2 = 1.5.
  // Adagrad: s = 4, p = 2 - 0.25 * (1 / 2) = 1.875 where the CPU has 2 - 0.25 * (2 / 2) = 1.75.
  for (BnbRule rule : {BnbRule::Rmsprop, BnbRule::Adagrad}) {
    CAPTURE(static_cast<int>(rule));
    RuleRun r = fresh(256);
    r.param.assign(256, 2.0f);
    step(rule, r, std::vector<float>(256, 1.0f), 0.25, 0.75, 0.5, 0.0);
    const bool rmsprop = rule == BnbRule::Rmsprop;
    CHECK(bits(r.m.scale[0]) == bits(rmsprop ? 1.0f : 4.0f));
    CHECK(bits(r.param[0]) == bits(rmsprop ? 1.75f : 1.875f));
  }
}

TEST_CASE("bnb RMSprop and Adagrad CUDA: no NaN/Inf reset; the non-negative state takes the sign fix") {
  for (BnbRule rule : {BnbRule::Rmsprop, BnbRule::Adagrad}) {
    CAPTURE(static_cast<int>(rule));
    std::vector<float> grad(300, 0.0f);
    grad[0] = 2.0f;
    grad[1] = NAN;
    grad[2] = -INFINITY;
    grad[256] = 2.0f;
    RuleRun r = fresh(300);
    step(rule, r, grad, 0.5, 0.75, 0.0, 1.0);
    // (-Inf)^2 = +Inf enters the state (alpha 0.75: 0.25 * Inf), the block's absmax; the parameter
    // 1 - 0.5 * (-Inf / (Inf + 1)) is NaN, as the NaN gradient's (0x7FFFFFFF); NaN states search to code
    // 0 and wrap to 255, +Inf / +Inf = NaN too, then +1: code 1
    CHECK(bits(r.m.scale[0]) == bits(INFINITY));
    CHECK(bits(r.param[1]) == f32_bits(0x7FFFFFFFu));
    CHECK(bits(r.param[2]) == f32_bits(0x7FFFFFFFu));
    CHECK(code(r.m.codes[1], r.m.qmap) == code(255, r.m.qmap));
    CHECK(code(r.m.codes[2], r.m.qmap) == code(1, r.m.qmap));
    // a finite state over the absmax +Inf is 0, the map's +0 (no fix); a zero gradient leaves p
    CHECK(value(r.m.qmap[r.m.codes[0]]) == value(0.0f));
    CHECK(bits(r.param[3]) == bits(1.0f));  // 1 - 0.5 * 0 / (0 + 1)
    // the second block is finite: g = 2 gives s = 0.25 * 4 = 1 (RMSprop) or 4 (Adagrad), its absmax
    CHECK(bits(r.m.scale[1]) == bits(rule == BnbRule::Rmsprop ? 1.0f : 4.0f));
  }
}
