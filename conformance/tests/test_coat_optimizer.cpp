// COAT's FP8 AdamW kernels: the libdevice log2f/powf emulation and every quirk of the kernels that
// the reference must reproduce (docs/formats/coat-optimizer.md#quirks, one test per subsection).
// Expected values are the numbers that page states (derived from the kernels' source and PTX), the
// C standard's special cases of pow/log2, or bounds measured against long double; none comes from
// the reference.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "bits_printer.hpp"
#include "lowbit/coat_exact.hpp"
#include "lowbit/coat_optimizer.hpp"
#include "lowbit/coat_study.hpp"
#include "lowbit/cuda_libdevice.hpp"
#include "lowbit/float_bits.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

std::vector<float> group_with(float fill, std::initializer_list<std::pair<int, float>> at, std::size_t n = 128) {
  std::vector<float> g(n, fill);
  for (auto [lane, value] : at) g[static_cast<std::size_t>(lane)] = value;
  return g;
}

double ulps_from(float got, long double exact) {
  const float lo = static_cast<float>(exact);
  const double ulp = std::nextafter(std::fabs(lo), INFINITY) - std::fabs(lo);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}

const std::uint32_t kInvFp8Max = 0x3B124925u;  // RN(1 / 448)

}  // namespace

TEST_CASE("libdevice log2f: log2f(100352), exact powers of two, special cases, < 1 ulp") {
  CHECK(bits(cuda::log2f(100352.0f)) == f32_bits(0x4184EAEDu));  // LU, the expansion's target exponent
  for (int e = -149; e <= 127; ++e) CHECK(value(cuda::log2f(std::ldexp(1.0f, e))) == value(static_cast<float>(e)));
  CHECK(value(cuda::log2f(0.0f)) == value(-INFINITY));
  CHECK(value(cuda::log2f(-0.0f)) == value(-INFINITY));
  CHECK(value(cuda::log2f(INFINITY)) == value(INFINITY));
  CHECK(bits(cuda::log2f(-1.0f)) == f32_bits(cuda::kCanonicalNan));
  CHECK(bits(cuda::log2f(NAN)) == f32_bits(cuda::kCanonicalNan));
  std::mt19937 rng(7);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = float_from_bits(rng() & 0x7F7FFFFFu);  // positive finite, subnormals included
    if (x == 0.0f || x == 1.0f) continue;
    worst = std::max(worst, ulps_from(cuda::log2f(x), std::log2(static_cast<long double>(x))));
  }
  MESSAGE("log2f worst error over 200 000 random floats: " << worst << " ulp (CUDA documents 1 ulp)");
  CHECK(value(worst) < value(1.0));
}

TEST_CASE("libdevice powf: C99 special cases and CUDA's 4-ulp bound with the reciprocal model") {
  CHECK(value(cuda::powf(NAN, 0.0f)) == value(1.0f));
  CHECK(value(cuda::powf(1.0f, NAN)) == value(1.0f));
  CHECK(bits(cuda::powf(2.0f, NAN)) == f32_bits(cuda::kCanonicalNan));
  CHECK(bits(cuda::powf(-0.0f, -3.0f)) == bits(-INFINITY));
  CHECK(bits(cuda::powf(-0.0f, -2.0f)) == bits(INFINITY));
  CHECK(bits(cuda::powf(-0.0f, 3.0f)) == bits(-0.0f));
  CHECK(bits(cuda::powf(-0.0f, 2.0f)) == bits(0.0f));
  CHECK(bits(cuda::powf(0.0f, 0.5f)) == bits(0.0f));
  CHECK(value(cuda::powf(0.0f, -0.5f)) == value(INFINITY));
  CHECK(value(cuda::powf(-1.0f, INFINITY)) == value(1.0f));
  CHECK(value(cuda::powf(0.5f, INFINITY)) == value(0.0f));
  CHECK(value(cuda::powf(2.0f, INFINITY)) == value(INFINITY));
  CHECK(value(cuda::powf(2.0f, -INFINITY)) == value(0.0f));
  CHECK(bits(cuda::powf(-2.0f, 0.5f)) == f32_bits(cuda::kCanonicalNan));
  CHECK(value(cuda::powf(-2.0f, 3.0f)) == value(-8.0f));
  CHECK(value(cuda::powf(-2.0f, 2.0f)) == value(4.0f));
  CHECK(value(cuda::powf(INFINITY, -1.0f)) == value(0.0f));
  CHECK(value(cuda::powf(-INFINITY, 3.0f)) == value(-INFINITY));
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> base(1e-6f, 4.0f), expo(-8.0f, 8.0f);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = base(rng), y = expo(rng);
    const long double exact = std::pow(static_cast<long double>(x), static_cast<long double>(y));
    if (exact > FLT_MAX || exact < FLT_MIN) continue;
    worst = std::max(worst, ulps_from(cuda::powf(x, y), exact));
  }
  MESSAGE("powf worst error over 200 000 random (x, y): " << worst << " ulp");
  CHECK(value(worst) <= value(4.0));
}

TEST_CASE("expansion: an all-zero group has k = +inf and every element comes back as 1e-30") {
  const std::vector<float> zeros(128, 0.0f);
  const coat::QuantizedGroup q = coat::expand_quantize_group(zeros, 16, false);
  CHECK(value(q.expand) == value(INFINITY));
  CHECK(bits(q.centre) == f32_bits(0x0DA24260u));
  CHECK(bits(q.scale) == f32_bits(kInvFp8Max));
  for (std::uint8_t c : q.codes) CHECK(e4m3(c) == e4m3(0));
  for (std::uint8_t c : q.codes) CHECK(bits(coat::expand_dequantize(c, q.scale, q.expand, q.centre, false)) == f32_bits(0x0DA24260u));
}

TEST_CASE("expansion: one nonzero value at lane 0 gives R = 1, and c against A decides the codes") {
  {  // c == A (A = 3): the element at +-448, the zeros at 0, s = 1/448
    const auto q = coat::expand_quantize_group(group_with(0.0f, {{0, -3.0f}}), 16, false);
    CHECK(value(q.expand) == value(INFINITY));
    CHECK(bits(q.scale) == f32_bits(kInvFp8Max));
    CHECK(e4m3(q.codes[0]) == e4m3(0xFE));
    CHECK(e4m3(q.codes[1]) == e4m3(0x00));
    // next step: 1/k = +0 and powf(x, +0) = 1: every element dequantizes to +-c, zeros included
    CHECK(value(coat::expand_dequantize(q.codes[0], q.scale, q.expand, q.centre, false)) == value(-3.0f));
    CHECK(value(coat::expand_dequantize(q.codes[1], q.scale, q.expand, q.centre, false)) == value(3.0f));
  }
  {  // c < A (A = 0.5): s = +inf, the element's code is NaN, zeros stay 0
    const auto q = coat::expand_quantize_group(group_with(0.0f, {{0, 0.5f}}), 16, false);
    CHECK(value(q.scale) == value(INFINITY));
    CHECK(e4m3(q.codes[0]) == e4m3(0x7F));
    CHECK(e4m3(q.codes[1]) == e4m3(0x00));
    // the NaN code dequantizes to +c: the sign is lost
    CHECK(value(coat::expand_dequantize(q.codes[0], q.scale, q.expand, q.centre, false)) == value(q.centre));
  }
  {  // c > A (A = 1e-3): s = 0, every code NaN, zeros included
    const auto q = coat::expand_quantize_group(group_with(0.0f, {{0, 1e-3f}}), 16, false);
    CHECK(value(q.scale) == value(0.0f));
    for (std::uint8_t c : q.codes) CHECK(e4m3(c) == e4m3(0x7F));
  }
}

TEST_CASE("expansion: the same value at lane 5 instead of lane 0 gives a wholly different k") {
  const auto q = coat::expand_quantize_group(group_with(0.0f, {{5, 1e-3f}}), 16, false);
  CHECK(value(coat::expand_group_stats(group_with(0.0f, {{5, 1e-3f}})).min) == value(0.0f));  // lane 0's own zero
  CHECK(value(q.expand) == value(0.125f));
  CHECK(value(q.centre) == doctest::Approx(3.16e-17).epsilon(0.01));
  CHECK(value(q.scale) == doctest::Approx(0.1087).epsilon(0.001));
  CHECK(e4m3(q.codes[5]) == e4m3(0x7E));
  CHECK(e4m3(q.codes[0]) == e4m3(0x00));
}

TEST_CASE("expansion: zeros hide their shuffle subtree from the group minimum") {
  // a zero at lane 1 hides all 16 odd lanes of its warp: the 0.5 at lane 3 is not seen
  CHECK(value(coat::expand_group_stats(group_with(1.0f, {{1, 0.0f}, {3, 0.5f}})).min) == value(1.0f));
  CHECK(value(coat::expand_group_stats(group_with(1.0f, {{1, 0.0f}, {2, 0.5f}})).min) == value(0.5f));
  // lane 2 hides {2, 6, ..., 30}; lane 8 hides {8, 24}; lane 16 only itself
  CHECK(value(coat::expand_group_stats(group_with(1.0f, {{2, 0.0f}, {30, 0.5f}})).min) == value(1.0f));
  CHECK(value(coat::expand_group_stats(group_with(1.0f, {{8, 0.0f}, {24, 0.5f}})).min) == value(1.0f));
  CHECK(value(coat::expand_group_stats(group_with(1.0f, {{8, 0.0f}, {9, 0.5f}})).min) == value(0.5f));
  CHECK(value(coat::expand_group_stats(group_with(1.0f, {{16, 0.0f}, {17, 0.5f}})).min) == value(0.5f));
  // a zero at lane 0 of warp 1 makes warp 1's result 0, which the block level skips
  CHECK(value(coat::expand_group_stats(group_with(1.0f, {{32, 0.0f}, {33, 0.5f}})).min) == value(1.0f));
  CHECK(value(coat::expand_group_stats(group_with(1.0f, {{32, 0.0f}, {64, 0.5f}})).min) == value(0.5f));
  // a zero warp 1 hides warp 3 (lane 3's parent is lane 1)
  CHECK(value(coat::expand_group_stats(group_with(1.0f, {{32, 0.0f}, {96, 0.5f}})).min) == value(1.0f));
  // the maximum has no such holes
  CHECK(value(coat::expand_group_stats(group_with(1.0f, {{1, 0.0f}, {3, 7.0f}})).max) == value(7.0f));
}

TEST_CASE("expansion: tail groups, the 1e9 cap, Inf, NaN and -0") {
  for (std::size_t r : {1u, 2u, 31u, 32u, 33u, 96u, 127u}) {
    std::vector<float> tail(r, 0.25f);
    tail[0] = 0.5f;
    const auto st = coat::expand_group_stats(tail);
    CHECK(value(st.max) == value(0.5f));
    CHECK(value(st.min) == value(r == 1 ? 0.5f : 0.25f));  // padding (FLT_MAX) is neutral
  }
  CHECK(value(coat::expand_quantize_group(std::vector<float>{0.7f}, 16, false).expand) == value(INFINITY));  // n = 1: R = 1
  // all magnitudes above 1e9: the minimum is capped, all 2e9 with one 4e9 gives k = 8.25, not 16.5625
  CHECK(value(coat::expand_quantize_group(group_with(2e9f, {{7, 4e9f}}), 16, false).expand) == value(8.25f));
  {  // one +Inf: k = 0, c = inf, every code +-448, s = 1/448
    const auto q = coat::expand_quantize_group(group_with(0.5f, {{3, INFINITY}, {4, -0.25f}}), 16, false);
    CHECK(value(q.expand) == value(0.0f));
    CHECK(value(q.centre) == value(INFINITY));
    CHECK(bits(q.scale) == f32_bits(kInvFp8Max));
    CHECK(e4m3(q.codes[3]) == e4m3(0x7E));
    CHECK(e4m3(q.codes[4]) == e4m3(0xFE));
  }
  {  // all NaN: max 0, min 1e9, R subnormal, k = -0.1875, every code NaN
    const auto q = coat::expand_quantize_group(std::vector<float>(128, NAN), 16, false);
    CHECK(value(q.expand) == value(-0.1875f));
    for (std::uint8_t c : q.codes) CHECK(e4m3(c) == e4m3(0x7F));
  }
  {  // one NaN: ignored by both trees, its own code NaN
    const auto q = coat::expand_quantize_group(group_with(0.5f, {{9, NAN}, {10, 0.25f}}), 16, false);
    CHECK(e4m3(q.codes[9]) == e4m3(0x7F));
    CHECK(value(coat::expand_group_stats(group_with(0.5f, {{9, NAN}, {10, 0.25f}})).min) == value(0.25f));
  }
  // -0 at lane 0 forces the minimum to 0 and encodes as 0x80
  const auto q = coat::expand_quantize_group(group_with(0.5f, {{0, -0.0f}, {1, 0.25f}}), 16, false);
  CHECK(value(coat::expand_group_stats(group_with(0.5f, {{0, -0.0f}})).min) == value(0.0f));
  CHECK(e4m3(q.codes[0]) == e4m3(0x80));
}

TEST_CASE("expansion: R = 100352 exactly gives k = 1") {
  const auto q = coat::expand_quantize_group(group_with(1.0f, {{0, 100352.0f}}), 16, false);
  CHECK(value(q.expand) == value(1.0f));
  CHECK(e4m3(q.codes[0]) == e4m3(0x7E));
}

TEST_CASE("no expansion: zero groups, Inf, NaN, the race region") {
  const auto zeros = coat::origin_quantize_group(std::vector<float>(128, 0.0f));
  CHECK(bits(zeros.scale) == bits(static_cast<float>(1e-20) / 448.0f));
  for (std::uint8_t c : zeros.codes) CHECK(e4m3(c) == e4m3(0));
  const auto inf = coat::origin_quantize_group(group_with(0.5f, {{3, INFINITY}, {4, -0.25f}}));
  CHECK(value(inf.scale) == value(INFINITY));
  CHECK(e4m3(inf.codes[0]) == e4m3(0x00));
  CHECK(e4m3(inf.codes[4]) == e4m3(0x80));
  CHECK(e4m3(inf.codes[3]) == e4m3(0x7F));
  const auto nan = coat::origin_quantize_group(group_with(0.5f, {{3, NAN}}));
  CHECK(e4m3(nan.codes[3]) == e4m3(0x7F));
  CHECK(e4m3(nan.codes[0]) == e4m3(0x7E));  // the maximum ignores the NaN
  // adding 1e-20 changes the float only below 2^-42: there the kernel's race makes the scale uncertain
  CHECK(coat::origin_race_sensitive(std::ldexp(1.0f, -43)));
  CHECK_FALSE(coat::origin_race_sensitive(std::ldexp(1.0f, -41)));
}

TEST_CASE("fresh states: codes and scale 0, k and c 1; the first step starts from m0 = v0 = 0") {
  for (bool expansion : {false, true}) {
    coat::Moment m = coat::fresh_moment(300, expansion), v = coat::fresh_moment(300, expansion);
    CHECK(m.scale.size() == 3);
    CHECK(value(coat::origin_dequantize(m.codes[0], m.scale[0])) == value(0.0f));
    if (expansion) CHECK(value(coat::expand_dequantize(m.codes[0], m.scale[0], m.expand[0], m.centre[0], false)) == value(0.0f));
    std::vector<float> param(300, 1.0f), grad(300, 0.01f);
    coat::adamw_step(param, grad, 1, m, v, {}, expansion);
    CHECK(value(param[0]) < value(1.0f));
  }
}

TEST_CASE("the expansion oracle study is deterministic for any thread count and finds the float32 path off") {
  const auto one = coat::run_expansion_study(12, 5, 16, 1);
  const auto two = coat::run_expansion_study(12, 5, 16, 2);
  REQUIRE(one.size() == two.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    CAPTURE(one[i].input);
    CHECK(one[i].codes_differ == two[i].codes_differ);
    CHECK(value(one[i].y_ulp_mean) == value(two[i].y_ulp_mean));
    CHECK(value(one[i].roundtrip_rel_official) == value(two[i].roundtrip_rel_official));
    CHECK(one[i].elements + 128 * (one[i].degenerate_groups + one[i].k_differs) == 12 * 128);
    // powf and the order of operations leave the value cast to FP8 off the exact one, but by a few ulps
    CHECK(value(one[i].y_ulp_mean) > value(0.0));
    CHECK(value(one[i].y_ulp_max) < value(64.0));
  }
}

TEST_CASE("an Inf poisons its group one step later: +-inf with expansion, NaN without") {
  const auto expand = coat::expand_quantize_group(group_with(0.5f, {{3, INFINITY}, {4, -0.25f}}), 16, false);
  // d = 448 * (1/448) = 1 exactly, powf(1, 1 / 0) = 1, times c = inf: every element +-inf
  CHECK(value(coat::expand_dequantize(expand.codes[0], expand.scale, expand.expand, expand.centre, false)) == value(INFINITY));
  CHECK(value(coat::expand_dequantize(expand.codes[4], expand.scale, expand.expand, expand.centre, false)) == value(-INFINITY));
  const auto origin = coat::origin_quantize_group(group_with(0.5f, {{3, INFINITY}}));
  // codes 0 times scale inf: 0 * inf = NaN for every finite element
  CHECK(is_nan(coat::origin_dequantize(origin.codes[0], origin.scale)));
}

TEST_CASE("paper math: the maximum maps to 448 and the minimum nonzero to 2^-9, k unrounded") {
  const coat::PaperGroup g = coat::paper_quantize_group(group_with(1e-3f, {{0, 0.0f}, {5, 0.5f}, {6, -2e-3f}}));
  CHECK(value(g.k) == doctest::Approx(std::log(229376.0) / std::log(500.0)));
  CHECK(e4m3(g.codes[5]) == e4m3(0x7E));            // 448
  CHECK(e4m3(g.codes[1]) == e4m3(0x01));            // 2^-9, the smallest subnormal
  CHECK(e4m3(g.codes[0]) == e4m3(0x00));            // zeros are not part of the range
  CHECK(value(coat::paper_dequantize(0x7E, g)) == doctest::Approx(0.5));
  // the kernel on the same group: lane 0's zero sets its minimum to 0 and k collapses to 1/16 steps
  CHECK(value(coat::expand_quantize_group(group_with(1e-3f, {{0, 0.0f}, {5, 0.5f}, {6, -2e-3f}}), 16, false).expand) <
        value(static_cast<float>(g.k)));
}
