// Optimizer steps: behaviours of the official kernels that the golden files cannot reach:
// bitsandbytes' CUDA kernel (no GPU here), edge cases of torchao's bf16 stochastic rounding and
// float32 step counter. Expected values come from the official code as
// docs/formats/bnb-adam8bit.md#the-cuda-kernel-bnbadam8bitcuda-an-ieee-model and
// docs/formats/torchao-adam.md#arithmetic-eager-float32 state it, never from running the reference.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "bits_printer.hpp"
#include "lowbit/bf16_round.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/narrow16.hpp"
#include "lowbit/optimizer.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

using namespace lowbit;
using optimizer::Moment;
using namespace lowbit::test;

namespace {

// A fresh bitsandbytes state of n elements: codes 0 and absmax 0 (signed map for state1).
Moment fresh_bnb(std::size_t n, bool is_signed) {
  Moment m;
  m.codes.assign(n, 0);
  m.scale.assign((n + 255) / 256, 0.0f);
  m.qmap = is_signed ? codebook::signed8() : codebook::unsigned8();
  return m;
}

struct BnbRun {
  std::vector<float> param;
  Moment m, v;
};

BnbRun bnb_cuda(std::vector<float> grad, std::int32_t step = 1, double wd = 0.0) {
  BnbRun r{std::vector<float>(grad.size(), 1.0f), fresh_bnb(grad.size(), true), fresh_bnb(grad.size(), false)};
  optimizer::BnbAdamHyper h;
  h.weight_decay = wd;
  optimizer::bnb_adam_cuda_step(r.param, grad, step, r.m, r.v, h);
  return r;
}

}  // namespace

TEST_CASE("bnb CUDA: 1 - beta is computed from the float32 beta, torchao's from the double") {
  const auto s = optimizer::bnb_adam_cuda_scalars({}, 1);
  CHECK(bits(s.w1) == f32_bits(0x3DCCCCD0u));
  CHECK(bits(s.w2) == f32_bits(0x3A831200u));
  const auto t = optimizer::torchao_adam_scalars({}, 1.0f);
  CHECK(bits(t.w1) == f32_bits(0x3DCCCCCDu));
  CHECK(bits(t.w2) == f32_bits(0x3A83126Fu));
}

TEST_CASE("bnb CUDA: the sign fix sends a signed zero to 126, an all-zero block to 255") {
  std::vector<float> grad(256, 0.5f);
  grad[3] = 0.0f;   // s1 = -0*b1 + (1-b1)*0 = +0: code 127, sign matches
  grad[4] = -0.0f;  // s1 = -0: searched to 127 (+0), the sign fix steps down to 126
  const BnbRun r = bnb_cuda(grad);
  const auto m = [&](std::uint32_t c) { return code(c, r.m.qmap); };  // signed map
  const auto v = [&](std::uint32_t c) { return code(c, r.v.qmap); };  // unsigned map
  CHECK(m(r.m.codes[3]) == m(127));
  CHECK(m(r.m.codes[4]) == m(126));
  CHECK(m(r.m.codes[0]) == m(255));  // the element equal to absmax
  CHECK(v(r.v.codes[3]) == v(0));

  const BnbRun zeros = bnb_cuda(std::vector<float>(256, 0.0f));  // s1 = +0, absmax 0: NaN -> code 0, 0 - 1 = 255
  CHECK(value(zeros.m.scale[0]) == value(0.0f));
  for (std::uint8_t c : zeros.m.codes) CHECK(m(c) == m(255));
  for (std::uint8_t c : zeros.v.codes) CHECK(v(c) == v(0));
  const BnbRun negative_zeros = bnb_cuda(std::vector<float>(256, -0.0f));  // s1 = -0 matches q[0]'s sign
  for (std::uint8_t c : negative_zeros.m.codes) CHECK(m(c) == m(0));
}

TEST_CASE("bnb CUDA: a NaN or Inf gradient resets the moments and leaves the parameter") {
  std::vector<float> grad(300, 0.25f);
  grad[10] = NAN;
  grad[11] = INFINITY;
  grad[270] = -INFINITY;
  const BnbRun r = bnb_cuda(grad, 1, 0.01);
  for (std::size_t i : {10u, 11u, 270u}) {
    CAPTURE(i);
    CHECK(value(r.param[i]) == value(1.0f));  // neither the update nor the decay
    CHECK(code(r.m.codes[i], r.m.qmap) == code(127, r.m.qmap));  // s1 = +0 in a block with absmax > 0
    CHECK(code(r.v.codes[i], r.v.qmap) == code(0, r.v.qmap));
  }
  CHECK(value(r.param[12]) != value(1.0f));
  CHECK(value(r.m.scale[0]) == value(r.m.scale[1]));  // both blocks: absmax from the finite gradients only
}

TEST_CASE("bnb CUDA: the tail block's padding slots enter the new absmax") {
  // 256 + 17 elements; step 1 fills both blocks, step 2 resets the tail's real elements (NaN
  // gradients): only the padding, state1 code 128 scaled by the old absmax and decayed, remains.
  std::vector<float> grad(273, 0.5f);
  BnbRun r{std::vector<float>(273, 1.0f), fresh_bnb(273, true), fresh_bnb(273, false)};
  optimizer::BnbAdamHyper h;
  optimizer::bnb_adam_cuda_step(r.param, grad, 1, r.m, r.v, h);
  const float tail_absmax = r.m.scale[1];
  REQUIRE(value(tail_absmax) > value(0.0f));
  for (std::size_t i = 256; i < 273; ++i) grad[i] = NAN;
  optimizer::bnb_adam_cuda_step(r.param, grad, 2, r.m, r.v, h);
  const float padding = r.m.qmap[128] * tail_absmax * static_cast<float>(h.beta1);  // + (1 - b1) * 0
  CHECK(bits(r.m.scale[1]) == bits(padding));
  CHECK(value(r.v.scale[1]) == value(0.0f));  // state2 pads with code 0: q2[0] = 0
  // a full block whose gradients are all reset has no padding: its absmax becomes 0
  std::vector<float> nan_block(256, NAN);
  const BnbRun full = bnb_cuda(nan_block);
  CHECK(value(full.m.scale[0]) == value(0.0f));
}

TEST_CASE("bnb CUDA: decoupled weight decay after the update") {
  const BnbRun plain = bnb_cuda(std::vector<float>(256, 0.5f), 1, 0.0);
  const BnbRun decayed = bnb_cuda(std::vector<float>(256, 0.5f), 1, 0.5);
  const float factor = std::fma(-1e-3f, 0.5f, 1.0f);
  CHECK(bits(decayed.param[0]) == bits(plain.param[0] * factor));
}

TEST_CASE("bf16 stochastic rounding: draw against the low 16 bits") {
  const float x = float_from_bits(0x3F80'0001u);  // fraction 1
  CHECK(bf16(bf16_stochastic_round(x, 0)) == bf16(0x3F81));       // r = 0 < fraction: away from zero
  CHECK(bf16(bf16_stochastic_round(x, 1)) == bf16(0x3F80));       // r = fraction: truncate
  CHECK(bf16(bf16_stochastic_round(float_from_bits(0xBF80'FFFFu), 0xFFFF)) == bf16(0xBF80));  // r = 0xFFFF never rounds up
  CHECK(bf16(bf16_stochastic_round(float_from_bits(0xBF80'FFFFu), 0xFFFE)) == bf16(0xBF81));  // away from zero, negative
  for (std::int32_t r : {0, 1234, 0xFFFF}) CHECK(bf16(bf16_stochastic_round(1.5f, r)) == bf16(0x3FC0));  // exact: always
  CHECK(bf16(bf16_stochastic_round(float_from_bits(0x7F80'0001u), 0xFFFF)) == bf16(0x7F80));  // NaN, low payload: +Inf
  CHECK(bf16(bf16_stochastic_round(FLT_MAX, 0)) == bf16(0x7F80));                            // FLT_MAX up to Inf
  CHECK(bf16(bf16_stochastic_round(FLT_MAX, 0xFFFF)) == bf16(0x7F7F));
}

TEST_CASE("bf16 nearest-even write-back: ties to even, overflow to Inf") {
  CHECK(bf16(bf16_round_nearest_even(float_from_bits(0x3F80'8000u))) == bf16(0x3F80));  // tie, even stays
  CHECK(bf16(bf16_round_nearest_even(float_from_bits(0x3F81'8000u))) == bf16(0x3F82));  // tie, odd goes up
  CHECK(bf16(bf16_round_nearest_even(float_from_bits(0x3F80'8001u))) == bf16(0x3F81));
  CHECK(bf16(bf16_round_nearest_even(FLT_MAX)) == bf16(0x7F80));
}

TEST_CASE("bf16 write-back NaNs: 0xFFFF vectorized, c10's 0x7FC0 scalar, bitsandbytes' native formula as it is") {
  for (std::uint32_t nan : {0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0xFFFFFFFFu}) {
    CHECK(bf16_round_nearest_even(float_from_bits(nan)) == 0xFFFF);
    CHECK(bf16_round_nearest_even_c10(float_from_bits(nan)) == 0x7FC0);
  }
  // bitsandbytes' float_to_bf16 adds its bias to every pattern: a NaN whose payload lies in the low
  // half carries into the exponent (0x7F800001 -> Inf, 0x7FFFFFFF wraps to -0) ...
  CHECK(bnb_cpu_bf16(float_from_bits(0x7F800001u)) == 0x7F80);
  CHECK(bnb_cpu_bf16(float_from_bits(0x7FFFFFFFu)) == 0x8000);
  // ... and is round to nearest even elsewhere (every bf16 and the midpoints around it)
  for (std::uint32_t h = 0; h < 0x7F80u; h += 7) {
    for (std::uint32_t low : {0x0000u, 0x7FFFu, 0x8000u, 0x8001u}) {
      const float x = float_from_bits((h << 16) | low);
      CHECK(bnb_cpu_bf16(x) == bf16_round_nearest_even(x));
    }
  }
}

#if defined(__x86_64__)
// The x86 F16C instruction itself, the conversion bitsandbytes' float_to_fp16 and torch's Half copy run.
__attribute__((target("f16c"))) std::uint16_t f16c(float x) {
  return static_cast<std::uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT), 0));
}

TEST_CASE("f16 narrowing equals the F16C instruction on every f16, midpoint, neighbour, NaN and 2^20 random patterns") {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // CPUID leaf 1, ECX bit 29: F16C (clang 14's
  // __builtin_cpu_supports has no "f16c")
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 29))) {
    MESSAGE("skipped: this CPU has no F16C");
    return;
  }
  std::size_t checked = 0, differ = 0;
  auto check = [&](std::uint32_t bits) {
    const float x = float_from_bits(bits);
    ++checked;
    if (f16_round_nearest_even(x) != f16c(x)) {
      if (++differ <= 5) CHECK_MESSAGE(false, "0x" << std::hex << bits << ": " << f16_round_nearest_even(x) << " against F16C " << f16c(x));
    }
  };
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {  // every f16 widened, and the float32s around its upper midpoint
    const std::uint32_t w = bits_of(widen_f16(static_cast<std::uint16_t>(h)));
    for (std::uint32_t d : {0u, 1u, 0xFFFu, 0x1000u, 0x1001u}) check(w + d);
    check(w - 1);
  }
  for (std::uint32_t e = 0; e < 256; ++e)  // every exponent with mantissas at the subnormal rounding places
    for (std::uint32_t m : {0u, 1u, 0x400000u, 0x7FFFFFu, 0x3FFFFFu, 0x200000u, 0x200001u, 0x1FFFFFu})
      for (std::uint32_t sign : {0u, 0x80000000u}) check(sign | (e << 23) | m);
  std::uint64_t state = 0x9E3779B97F4A7C15ull;  // splitmix64
  for (int k = 0; k < (1 << 20); ++k) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    check(static_cast<std::uint32_t>(z ^ (z >> 31)));
  }
  CHECK(differ == 0);
  CHECK(checked > 1'400'000);
  // hand-picked: 65520 (halfway to 2^16) ties to Inf, 2^-25 ties to 0, a NaN keeps its payload's top bits
  CHECK(f16_round_nearest_even(65520.0f) == 0x7C00);
  CHECK(f16_round_nearest_even(0x1p-25f) == 0x0000);
  CHECK(f16_round_nearest_even(float_from_bits(0xFFFFFFFFu)) == 0xFFFF);
  CHECK(f16_round_nearest_even(float_from_bits(0x7F800001u)) == 0x7E00);
}
#endif

TEST_CASE("torchao: the float32 step counter stops at 2^24") {
  std::vector<float> param(4, 1.0f), grad(4, 0.1f);
  Moment m, v;
  m.values.assign(4, 0.0f);
  v.values.assign(4, 0.0f);
  optimizer::TorchaoAdamOptions o;
  o.kind = optimizer::TorchaoState::Dense;
  float step = 16777216.0f;
  optimizer::torchao_adam_step(param, grad, step, m, v, nullptr, {}, o);
  CHECK(value(step) == value(16777216.0f));
}

TEST_CASE("torchao: stochastic rounding needs a bf16 parameter and one draw per element") {
  std::vector<float> param(4, 1.0f), grad(4, 0.1f);
  Moment m, v;
  m.values.assign(4, 0.0f);
  v.values.assign(4, 0.0f);
  const std::vector<std::int32_t> draws(3, 0);
  optimizer::TorchaoAdamOptions o;
  o.kind = optimizer::TorchaoState::Dense;
  o.param_dtype = optimizer::ParamDtype::BFloat16;
  o.stochastic_round_random = draws;
  float step = 0.0f;
  CHECK_THROWS_AS(optimizer::torchao_adam_step(param, grad, step, m, v, nullptr, {}, o), std::invalid_argument);
}

TEST_CASE("issue 30: torchao writes a bf16 NaN with torch's vectorized copy (0xFFFF) or, at default, c10's (0x7FC0)") {
  // torchao 0.18 optim/adam.py single_param_adam, eager, torch 2.15: p = [1, NaN, -2, 0.5] and
  // g = [0.1, 0.2, NaN, 0.4] in bf16, dense bf16 moments (zeros_like(p)), step 0 -> 1, lr tensor(1e-3),
  // betas (0.9, 0.999), weight_decay 1e-2, eps 1e-8, AdamW. Printed at ATEN_CPU_CAPABILITY=avx512 and
  // avx2 (the same bits) and default. p.copy_, exp_avg.copy_ and exp_avg_sq.copy_ all write the NaN.
  struct Pinned {
    bool vectorized;  // avx2, avx512; false: default
    std::vector<std::uint16_t> param, exp_avg, exp_avg_sq;
  };
  const std::vector<Pinned> pinned = {
      {true, {0x3F80, 0xFFFF, 0xFFFF, 0x3EFF}, {0x3C24, 0x3CA4, 0xFFFF, 0x3D24}, {0x3728, 0x3828, 0xFFFF, 0x3928}},
      {false, {0x3F80, 0x7FC0, 0x7FC0, 0x3EFF}, {0x3C24, 0x3CA4, 0x7FC0, 0x3D24}, {0x3728, 0x3828, 0x7FC0, 0x3928}}};
  const auto widen = [](std::initializer_list<std::uint16_t> b) {
    std::vector<float> out;
    for (std::uint16_t v : b) out.push_back(float_from_bits(std::uint32_t{v} << 16));
    return out;
  };
  const auto hex = [](const std::vector<std::uint16_t>& v) {  // printed on a failure
    std::string out;
    for (std::uint16_t h : v) out += fmt::format("{}{:04X}", out.empty() ? "" : " ", h);
    return out;
  };
  const auto bf16_bits = [](const std::vector<float>& v) {
    std::vector<std::uint16_t> out;
    for (float x : v) out.push_back(static_cast<std::uint16_t>(bits_of(x) >> 16));
    return out;
  };
  for (const Pinned& p : pinned)
    for (bool fast : {false, true}) {
      CAPTURE(p.vectorized);
      CAPTURE(fast);
      std::vector<float> param = widen({0x3F80, 0x7FC0, 0xC000, 0x3F00});
      const std::vector<float> grad = widen({0x3DCD, 0x3E4D, 0x7FC0, 0x3ECD});
      Moment m, v;
      m.values.assign(4, 0.0f);
      v.values.assign(4, 0.0f);
      optimizer::AdamHyper h;
      h.weight_decay = 1e-2;
      h.fused = p.vectorized;  // the capability, as the format sets both
      optimizer::TorchaoAdamOptions o;
      o.kind = optimizer::TorchaoState::Dense;
      o.param_dtype = optimizer::ParamDtype::BFloat16;
      o.vectorized_copies = p.vectorized;
      float step = 0.0f;
      if (fast) optimizer::torchao_adam_step(param, grad, step, m, v, nullptr, h, o);
      else optimizer::scalar::torchao_adam_step(param, grad, step, m, v, nullptr, h, o);
      CHECK(hex(bf16_bits(param)) == hex(p.param));
      CHECK(hex(bf16_bits(m.values)) == hex(p.exp_avg));
      CHECK(hex(bf16_bits(v.values)) == hex(p.exp_avg_sq));
      // bf16_stochastic_round (torch.manual_seed(0)'s draws in torchao): the same NaNs, whatever the draw
      for (std::int32_t draw : {0, 0x8000, 0xFFFF}) {
        std::vector<float> sr_param = widen({0x3F80, 0x7FC0, 0xC000, 0x3F00});
        Moment sm, sv;
        sm.values.assign(4, 0.0f);
        sv.values.assign(4, 0.0f);
        const std::vector<std::int32_t> draws(4, draw);
        optimizer::TorchaoAdamOptions so = o;
        so.stochastic_round_random = draws;
        float sr_step = 0.0f;
        optimizer::torchao_adam_step(sr_param, grad, sr_step, sm, sv, nullptr, h, so);
        CHECK(bf16_bits(sr_param)[1] == p.param[1]);
        CHECK(bf16_bits(sr_param)[2] == p.param[2]);
      }
    }
  // through the registry (torchao.adam.dense, bf16 tensors), as conform runs a case: cpu_capability decides
  const auto bf16_tensor = [](const std::string& name, std::initializer_list<std::uint16_t> b) {
    std::vector<std::uint8_t> bytes;
    for (std::uint16_t v : b) bytes.insert(bytes.end(), {static_cast<std::uint8_t>(v), static_cast<std::uint8_t>(v >> 8)});
    return Tensor::from_bytes(name, DType::BF16, {static_cast<std::int64_t>(b.size())}, bytes);
  };
  for (const Pinned& p : pinned) {
    CAPTURE(p.vectorized);
    Case in;
    in.metadata = {{"format", "torchao.adam.dense"},
                   {"params", nlohmann::json{{"weight_decay", 1e-2}, {"cpu_capability", p.vectorized ? "avx2" : "default"}}.dump()}};
    in.add(bf16_tensor("param", {0x3F80, 0x7FC0, 0xC000, 0x3F00}));
    in.add(bf16_tensor("grad", {0x3DCD, 0x3E4D, 0x7FC0, 0x3ECD}));
    in.add(bf16_tensor("exp_avg", {0, 0, 0, 0}));
    in.add(bf16_tensor("exp_avg_sq", {0, 0, 0, 0}));
    in.add(Tensor::from_f32("step", {}, std::vector<float>{0.0f}));
    in.add(Tensor::from_f32("lr", {}, std::vector<float>{1e-3f}));
    const Case out = run_reference(*find_format("torchao.adam.dense"), in);
    for (std::size_t i = 0; i < 4; ++i) {
      CAPTURE(i);
      CHECK(out.require("param.next").bits_at(i) == p.param[i]);
      CHECK(out.require("exp_avg.next").bits_at(i) == p.exp_avg[i]);
      CHECK(out.require("exp_avg_sq.next").bits_at(i) == p.exp_avg_sq[i]);
    }
  }
}
