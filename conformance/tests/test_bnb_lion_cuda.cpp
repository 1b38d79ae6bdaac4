// bitsandbytes' one-state CUDA kernel for Lion (bnb.lion8bit.cuda, an IEEE model): the behaviours its
// source shows (bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit1StateBlockwise, as
// docs/formats/bnb-lion8bit.md#the-cuda-kernel-bnblion8bitcuda-an-ieee-model states them) that set it
// apart from the CPU format and from Adam's CUDA kernel. No GPU here: the expected values are worked
// out from the source by hand, never taken from running the reference.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <vector>

#include "bits_printer.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

struct LionRun {
  std::vector<float> param;
  optimizer::Moment m;
};

// n parameters of 1.0 and bitsandbytes' fresh state (codes 0, absmax 0, its signed dynamic map).
LionRun fresh(std::size_t n) {
  LionRun r{std::vector<float>(n, 1.0f), {}};
  r.m.codes.assign(n, 0);
  r.m.scale.assign((n + 255) / 256, 0.0f);
  r.m.qmap = codebook::dynamic_map(true, 7, 8, codebook::Linspace::Fma, true);
  return r;
}

void step(LionRun& r, const std::vector<float>& grad, double lr = 1e-4, double wd = 0.0) {
  optimizer::BnbRuleHyper h;  // betas 0.9 / 0.99: Lion8bit's defaults
  h.lr = lr;
  h.weight_decay = wd;
  optimizer::bnb_lion_cuda_step(r.param, grad, r.m, h);
}

}  // namespace

TEST_CASE("bnb Lion CUDA: 1 - beta2 is float32 arithmetic on the float32 beta") {
  LionRun r = fresh(256);
  step(r, std::vector<float>(256, 1.0f));
  // a fresh state dequantizes to -0 (q[0] = -1 times absmax 0): the new state is (1.0f - 0.99f) * 1,
  // 0x3C23D700, where the CPU's f32(1 - 0.99) is 0x3C23D70A
  CHECK(bits(r.m.scale[0]) == f32_bits(0x3C23D700u));
  CHECK(code(r.m.codes[0], r.m.qmap) == code(255, r.m.qmap));
  // the sign of (1.0f - 0.9f) * 1 is +1: the parameter moves by lr
  CHECK(bits(r.param[0]) == bits(1.0f - 1e-4f));
}

TEST_CASE("bnb Lion CUDA: decoupled weight decay before the update") {
  LionRun r = fresh(256);
  step(r, std::vector<float>(256, 1.0f), 0.5, 0.5);
  // p = 1 * (1 - 0.5 * 0.5) - 0.5 * sign(+) = 0.25; decayed after the update it would be 0.375
  CHECK(bits(r.param[0]) == bits(0.25f));
}

TEST_CASE("bnb Lion CUDA: NaN and Inf gradients are not reset; sign of NaN is 0; NaN states get code 255") {
  std::vector<float> grad(300, 0.25f);
  grad[10] = NAN;
  grad[11] = INFINITY;
  grad[12] = -INFINITY;
  LionRun r = fresh(300);
  step(r, grad, 1e-4, 0.01);
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
  LionRun r = fresh(273);
  step(r, grad);
  const float old_absmax = r.m.scale[1];
  REQUIRE(value(old_absmax) > value(0.0f));
  grad[256] = NAN;
  step(r, grad);
  CHECK(bits(r.m.scale[1]) == bits(r.m.qmap[128] * old_absmax * 0.99f));
  CHECK(code(r.m.codes[256], r.m.qmap) == code(255, r.m.qmap));  // its NaN state
}

TEST_CASE("bnb Lion CUDA: an all-zero block's codes wrap to 255, an all -0 block keeps 0") {
  LionRun zeros = fresh(256);
  step(zeros, std::vector<float>(256, 0.0f));  // s = +0, absmax 0: 0 / 0 -> code 0, 0 - 1 = 255
  CHECK(value(zeros.m.scale[0]) == value(0.0f));
  for (std::uint8_t c : zeros.m.codes) CHECK(code(c, zeros.m.qmap) == code(255, zeros.m.qmap));
  LionRun negative = fresh(256);
  step(negative, std::vector<float>(256, -0.0f));  // s = -0 matches q[0]'s sign
  for (std::uint8_t c : negative.m.codes) CHECK(code(c, negative.m.qmap) == code(0, negative.m.qmap));
}
