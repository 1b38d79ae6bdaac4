// bitsandbytes' two-state CUDA kernel for AdEMAMix (bnb.ademamix8bit.cuda, an IEEE model): the
// behaviours its source shows (bitsandbytes 0.50 csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise,
// ADEMAMIX, at 95f9af30, as docs/formats/bnb-ademamix8bit.md states them) that set it apart from the CPU
// format. No GPU here: the expected values are worked out from the source by hand, never taken from
// running the reference.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "bits_printer.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

struct AdemamixRun {
  std::vector<float> param;
  optimizer::Moment m1, m2, nu;  // exp_avg, exp_avg_slow (state1's rows), exp_avg_sq (state2)
  std::int32_t steps = 0;
};

// n parameters of 1.0 and AdEMAMix8bit's fresh states: codes 0, absmax 0, the signed dynamic map for
// state1's rows and the unsigned one for state2.
AdemamixRun fresh(std::size_t n) {
  AdemamixRun r{std::vector<float>(n, 1.0f), {}, {}, {}};
  for (optimizer::Moment* m : {&r.m1, &r.m2, &r.nu}) {
    m->codes.assign(n, 0);
    m->scale.assign((n + 255) / 256, 0.0f);
    m->qmap = m == &r.nu ? codebook::unsigned8() : codebook::signed8();
  }
  return r;
}

// betas 0.5 / 0.75 / 0.75 and alpha 2 make every step-1 and step-2 quantity below exact: 1 - beta is
// 0.5, 0.25, 0.25; c1 = 1 - 0.5 = 0.5, c2 = sqrt(1 - 0.75) = 0.5.
optimizer::BnbAdemamixHyper hyper(double lr, double wd) {
  optimizer::BnbAdemamixHyper h;
  h.lr = lr;
  h.beta1 = 0.5;
  h.beta2 = 0.75;
  h.beta3 = 0.75;
  h.alpha = 2.0;
  h.eps = 0.0;
  h.weight_decay = wd;
  return h;
}

void step(AdemamixRun& r, const std::vector<float>& grad, const optimizer::BnbAdemamixHyper& h) {
  optimizer::bnb_ademamix_cuda_step(r.param, grad, ++r.steps, r.m1, r.m2, r.nu, h);
}

}  // namespace

TEST_CASE("bnb AdEMAMix CUDA: sizes that 256 does not divide are refused (the slow absmax index races)") {
  AdemamixRun r = fresh(300);
  CHECK_THROWS_AS(step(r, std::vector<float>(300, 1.0f), hyper(0.5, 0.0)), std::invalid_argument);
}

TEST_CASE("bnb AdEMAMix CUDA: three moments, each with its absmax; the update from the source") {
  AdemamixRun r = fresh(256);
  step(r, std::vector<float>(256, 1.0f), hyper(0.5, 0.0));
  // step 1 from fresh states (-0, 0): m1 = 0.5 g = 0.5, nu = 0.25 g g = 0.25, the slow m2 = 0.25 g = 0.25;
  // p = 1 - 0.5 (0.5 / 0.5 + 2 * 0.25) / (sqrt(0.25) / 0.5 + 0) = 1 - 0.5 * 1.5 = 0.25
  CHECK(bits(r.m1.scale[0]) == bits(0.5f));
  CHECK(bits(r.nu.scale[0]) == bits(0.25f));
  CHECK(bits(r.m2.scale[0]) == bits(0.25f));
  CHECK(bits(r.param[0]) == bits(0.25f));
  CHECK(code(r.m1.codes[0], r.m1.qmap) == code(255, r.m1.qmap));
  CHECK(code(r.m2.codes[0], r.m2.qmap) == code(255, r.m2.qmap));
  CHECK(code(r.nu.codes[0], r.nu.qmap) == code(255, r.nu.qmap));
  step(r, std::vector<float>(256, 1.0f), hyper(0.5, 0.0));
  // step 2: m1 = 0.5 * 0.5 + 0.5 = 0.75 and the slow m2 = 0.25 * 0.75 + 0.25 = 0.4375: state1's two rows
  // keep apart absmax values
  CHECK(bits(r.m1.scale[0]) == bits(0.75f));
  CHECK(bits(r.m2.scale[0]) == bits(0.4375f));
}

TEST_CASE("bnb AdEMAMix CUDA: decay after the update; a NaN or Inf gradient resets the moments and leaves p") {
  std::vector<float> grad(256, 1.0f);
  grad[1] = NAN;
  grad[2] = -INFINITY;
  AdemamixRun r = fresh(256);
  step(r, grad, hyper(0.5, 0.5));
  // p = (1 - 0.5 * 1.5) * (1 - 0.5 * 0.5) = 0.25 * 0.75 = 0.1875; decayed first (the CPU's order) it
  // would be 0.75 - 0.75 = 0
  CHECK(bits(r.param[0]) == bits(0.1875f));
  // the non-finite gradients: p untouched, not even decayed; their three moments 0 (+0: the maps' 0)
  CHECK(bits(r.param[1]) == bits(1.0f));
  CHECK(bits(r.param[2]) == bits(1.0f));
  for (std::size_t i : {1, 2}) {
    CHECK(value(r.m1.qmap[r.m1.codes[i]]) == value(0.0f));
    CHECK(value(r.m2.qmap[r.m2.codes[i]]) == value(0.0f));
    CHECK(value(r.nu.qmap[r.nu.codes[i]]) == value(0.0f));
  }
  CHECK(bits(r.m1.scale[0]) == bits(0.5f));  // the finite slots' absmax, as without them
}

TEST_CASE("bnb AdEMAMix CUDA: the scalars in float32, the schedulers' alpha rounded once") {
  optimizer::BnbAdemamixHyper h;  // AdEMAMix8bit's defaults: betas 0.9 / 0.999 / 0.9999, alpha 5
  h.t_alpha = 3;
  const optimizer::BnbAdemamixCudaScalars s = optimizer::bnb_ademamix_cuda_scalars(h, 1);
  // c1 = 1.0f - powf(0.9f, 1) = 1.0f - 0.9f, 0x3DCCCCD0 (f32(0.1) would be 0x3DCCCCCD)
  CHECK(bits(s.c1) == f32_bits(0x3DCCCCD0u));
  // alpha_t = min(1 * 5 / 3, 5) in double, then float32
  CHECK(bits(s.alpha) == bits(static_cast<float>(5.0 / 3.0)));
  CHECK(bits(s.w3) == bits(1.0f - 0.9999f));
}
