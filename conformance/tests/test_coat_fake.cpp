// COAT fake quantization (docs/formats/coat-fake.md): its tie rules, signed zeros, missing saturation
// and scale division. Expected values come from that page's statements (and docs/formats/fp8.md for
// the real casts), from exact reasoning written next to each check, or from COAT's own code (golden/coat/coat.fake.*, exported on the CPU): never from the reference.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "bits_printer.hpp"
#include "elementwise.hpp"
#include "golden_fixture.hpp"
#include "lowbit/coat_activation.hpp"
#include "lowbit/coat_fake.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"

using namespace lowbit;
using fp8::FormatId;
using namespace lowbit::coat_fake;
using namespace lowbit::test;

namespace {

float tri(float x) { return floatexmy_triton(x, FormatId::E4M3FN, Model::Interpreter); }
float tri_gpu(float x) { return floatexmy_triton(x, FormatId::E4M3FN, Model::Gpu); }
float tor(float x) { return floatexmy_torch(x, FormatId::E4M3FN); }

// Every non-negative value of E4M3's grid between 2^-9 and 448: m/8*2^-6 and (1+m/8)*2^(e-7)
// (docs/formats/fp8.md#decoding-exact).
std::vector<float> e4m3_grid() {
  std::vector<float> g;
  for (int m = 0; m < 8; ++m) g.push_back(std::ldexp(static_cast<float>(m) / 8.0f, -6));
  for (int e = 1; e < 16; ++e)
    for (int m = 0; m < 8; ++m)
      if (!(e == 15 && m == 7)) g.push_back(std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7));
  return g;
}

}  // namespace

TEST_CASE("ties round away from zero in the Triton fake path, to even in the torch fake path and in real casts") {
  // 1.0625 is halfway between 1.0 (mantissa 000, even) and 1.125 (001).
  CHECK(value(tri(1.0625f)) == value(1.125f));
  CHECK(value(tri_gpu(1.0625f)) == value(1.125f));
  CHECK(value(tor(1.0625f)) == value(1.0f));
  CHECK(e4m3(coat_act::cast_fp8(1.0625f, fp8::FormatId::E4M3FN, coat_act::Casts::Gpu)) == e4m3(0x38));  // RN-even: 1.0
  CHECK(value(tri(-1.0625f)) == value(-1.125f));
  CHECK(value(tor(-1.0625f)) == value(-1.0f));
  // 1.1875 is halfway between 1.125 (001) and 1.25 (010): away and even agree.
  CHECK(value(tri(1.1875f)) == value(1.25f));
  CHECK(value(tor(1.1875f)) == value(1.25f));
  // Subnormal ties: 2^-10 is halfway between 0 and 2^-9; 5*2^-10 between 2*2^-9 and 3*2^-9.
  CHECK(value(tri(std::ldexp(1.0f, -10))) == value(std::ldexp(1.0f, -9)));
  CHECK(value(tor(std::ldexp(1.0f, -10))) == value(0.0f));
  CHECK(value(tri(std::ldexp(5.0f, -10))) == value(std::ldexp(3.0f, -9)));
  CHECK(value(tor(std::ldexp(5.0f, -10))) == value(std::ldexp(2.0f, -9)));
  // E5M2: 1.125 is halfway between 1.0 (00) and 1.25 (01).
  CHECK(value(floatexmy_triton(1.125f, FormatId::E5M2, Model::Interpreter)) == value(1.25f));
  CHECK(value(floatexmy_torch(1.125f, FormatId::E5M2)) == value(1.0f));

  // Every E4M3 midpoint: the Triton path gives the upper neighbour, the torch path the even one.
  const std::vector<float> g = e4m3_grid();
  for (std::size_t i = 0; i + 1 < g.size(); ++i) {
    const float mid = (g[i] + g[i + 1]) / 2.0f;  // exact: neighbours differ by one grid ulp
    const bool lower_even = (i % 2) == 0;         // the grid alternates even/odd mantissas from 0
    CAPTURE(bits(mid));
    CHECK(value(tri(mid)) == value(g[i + 1]));
    CHECK(value(tri(-mid)) == value(-g[i + 1]));
    CHECK(value(tor(mid)) == value(lower_even ? g[i] : g[i + 1]));
  }

  // COAT's code: the golden cases (Triton kernel under the interpreter with libdevice.round = roundf,
  // torch on the CPU) agree with the reference, and differ from each other exactly at ties.
  for (const char* spelling : {"e4m3", "e5m2"}) {
    CAPTURE(spelling);
    const Case t = golden_case(std::string("coat/coat.fake.floatexmy.triton/") + spelling + ".edges.safetensors");
    const Case h = golden_case(std::string("coat/coat.fake.floatexmy.torch/") + spelling + ".edges.safetensors");
    const std::vector<float> x = t.require("input").f32(), yt = t.require("output").f32(), yh = h.require("output").f32();
    const FormatId f = *fp8::parse_format(spelling);
    int differ = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      CAPTURE(bits(x[i]));
      CHECK(bits(floatexmy_triton(x[i], f, Model::Interpreter)) == bits(yt[i]));
      CHECK(bits(floatexmy_torch(x[i], f)) == bits(yh[i]));
      if (std::isfinite(x[i]) && x[i] != 0.0f && yt[i] != yh[i]) ++differ;
    }
    CHECK(differ > 50);  // every tie with an odd lower neighbour, both signs
  }
}

TEST_CASE("-0 keeps its sign in the Triton fake path and becomes +0 in the torch fake path") {
  CHECK(bits(tri(-0.0f)) == f32_bits(0x80000000u));  // sign = 1 - 2*signbit(-0) = -1; -1 * 2^-6 * 0 = -0
  CHECK(bits(tri_gpu(-0.0f)) == f32_bits(0x80000000u));
  CHECK(bits(tor(-0.0f)) == f32_bits(0x00000000u));  // x.sign() of -0 is 0: 0 * 2^-6 * 0 = +0
  // A negative value that underflows keeps its sign in both: sign -1, mant_q 0 gives -0.
  CHECK(bits(tri(-std::ldexp(1.0f, -11))) == f32_bits(0x80000000u));
  CHECK(bits(tor(-std::ldexp(1.0f, -10))) == f32_bits(0x80000000u));  // the tie rounds to even 0
  // COAT's code agrees (golden inputs hold -0 and -2^-10).
  const Case t = golden_case("coat/coat.fake.floatexmy.triton/e4m3.edges.safetensors");
  const Case h = golden_case("coat/coat.fake.floatexmy.torch/e4m3.edges.safetensors");
  const std::vector<float> x = t.require("input").f32(), yt = t.require("output").f32(), yh = h.require("output").f32();
  int negzero = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (bits_of(x[i]) == 0x80000000u) {
      CHECK(bits(yt[i]) == f32_bits(0x80000000u));
      CHECK(bits(yh[i]) == f32_bits(0x00000000u));
      ++negzero;
    }
  CHECK(negzero > 0);
}

TEST_CASE("no saturation: values beyond 448 stay on the extended grid") {
  // expo is clamped at 8, so 500/256 = 1.953125 rounds to 2.0 (512), 480 = 1.875*256 stays (not E4M3),
  // and 1000/256 = 3.90625 keeps its integer part 3: 3 + round(0.90625*8)/8 = 3.875 -> 992.
  CHECK(value(tri(500.0f)) == value(512.0f));
  CHECK(value(tri(480.0f)) == value(480.0f));
  CHECK(value(tri(1000.0f)) == value(992.0f));
  CHECK(value(tor(500.0f)) == value(512.0f));
  // 464 = 1.8125*256 is the tie between 448 and 480: frac 6.5 rounds away to 7 (480, not E4M3) in the
  // Triton path and to even 6 (448) in the torch path; a real cast rounds it to 448 too
  // (docs/formats/fp8.md#boundary-inputs).
  CHECK(value(tri(464.0f)) == value(480.0f));
  CHECK(value(tor(464.0f)) == value(448.0f));
}

TEST_CASE("non-finite inputs: NaN flows through |x|, Inf becomes NaN; the GPU model gives the canonical NaN") {
  CHECK(bits(tri(float_from_bits(0xFFC00000u))) == f32_bits(0x7FC00000u));  // |x| is what reaches y
  CHECK(bits(tri(INFINITY)) == f32_bits(0xFFC00000u));                      // inf - floor(inf): x86's default NaN
  CHECK(bits(tri_gpu(INFINITY)) == f32_bits(0x7FFFFFFFu));
  CHECK(bits(tri_gpu(float_from_bits(0xFFC00000u))) == f32_bits(0x7FFFFFFFu));
  CHECK(bits(tor(float_from_bits(0xFFC00000u))) == f32_bits(0x7FC00000u));  // torch.sign(NaN) = 0
}

TEST_CASE("SymmQuantizer: the scale is a true division on the CPU, a reciprocal multiply on CUDA") {
  // Find an absmax where RN(2a/896) != RN(2a * RN(1/896)) (docs/formats/coat-fake.md), by plain IEEE
  // arithmetic here.
  float a = 1.0f, by_div = 0, by_rcp = 0;
  for (int k = 0; k < 100000; ++k, a = std::nextafter(a, 2.0f)) {
    by_div = (2.0f * a) / 896.0f;
    by_rcp = (2.0f * a) * (1.0f / 896.0f);
    if (by_div != by_rcp) break;
  }
  REQUIRE(value(by_div) != value(by_rcp));
  CHECK(bits(symm_scale(a, FormatId::E4M3FN, Model::Interpreter)) == bits(by_div));
  CHECK(bits(symm_scale(a, FormatId::E4M3FN, Model::Gpu)) == bits(by_rcp));
  CHECK(value(symm_scale(1.0f, FormatId::E5M2, Model::Interpreter)) == value(2.0f / 114688.0f));

  // COAT's code on CPU torch: every block scale is (2*(amax+eps))/896 by true division, and the
  // reference reproduces rq, q and scale bit for bit.
  const Case c = golden_case("coat/coat.fake.symm/e4m3.8x64.b1x16.safetensors");
  const std::vector<float> x = c.require("input").f32(), s = c.require("scale").f32();
  REQUIRE(s.size() == 8 * 4);
  int rcp_would_differ = 0;
  for (std::size_t b = 0; b < s.size(); ++b) {
    float amax = 0;
    bool finite = true;
    for (std::size_t i = 0; i < 16; ++i) {
      const float v = x[(b / 4) * 64 + (b % 4) * 16 + i];
      finite = finite && std::isfinite(v);
      amax = std::fmax(amax, std::fabs(v));
    }
    if (!finite) continue;
    const float abs_eps = amax + 1e-8f;
    CHECK(bits(s[b]) == bits((2.0f * abs_eps) / 896.0f));
    if ((2.0f * abs_eps) * (1.0f / 896.0f) != s[b]) ++rcp_would_differ;
  }
  MESSAGE("blocks whose CUDA reciprocal-multiply scale would differ: " << rcp_would_differ);
  const FormatSpec* f = find_format("coat.fake.symm");
  REQUIRE(f);
  const Case r = run_reference(*f, c);
  for (const char* name : {"rq", "q", "scale"}) {
    CAPTURE(name);
    CHECK(same_bytes(r.require(name), c.require(name)));
  }
}

TEST_CASE("SymmQuantizer rejects block sizes that do not divide the shape (COAT asserts)") {
  std::vector<float> x(8 * 20, 1.0f);
  CHECK_THROWS_AS(symm_quantize(x, 8, 20, 1, 16, 1e-8f, FormatId::E4M3FN, Model::Interpreter), std::invalid_argument);
  CHECK_NOTHROW(symm_quantize(x, 8, 20, -1, -1, 1e-8f, FormatId::E4M3FN, Model::Interpreter));
}

TEST_CASE("issue 30: SymmQuantizer with 1x1 tiles multiplies Q by same-shape scales") {
  // COAT 80ec99f quantize_function.py block_cut(x, 1, 1) + SymmQuantizer.forward(symm=True, "E4M3",
  // stochastic=False, epsilon=1e-8) + block_reshape, under the Triton interpreter with torch 2.15, at
  // ATEN_CPU_CAPABILITY=avx512 and avx2 (the same bits) and default. Every element is a NaN (x[i] =
  // payloads[i % 6]) and its own tile: scale 0x7FC00000 (torch's amax), Q its NaN without sign
  // (quieted), and RQ = Q * scale two tensors of M x N x 1 x 1 elements: 'q' where RQ is Q's NaN.
  const std::vector<std::uint32_t> payloads = {0xFFFF0000u, 0x7FC00001u, 0xFFC00001u, 0xFFFFFFFFu, 0x7FFFFFFFu, 0x7FA00000u};
  const std::vector<std::uint32_t> q_of = {0x7FFF0000u, 0x7FC00001u, 0x7FC00001u, 0x7FFFFFFFu, 0x7FFFFFFFu, 0x7FE00000u};
  struct Pinned {
    std::int64_t m, n;
    const char* capability;
    std::string rq;
  };
  for (const Pinned& p : std::vector<Pinned>{{4, 5, "avx2", "ssssssssssssssssqqqq"},
                                             {4, 5, "avx512", "ssssssssssssssssqqqq"},
                                             {4, 5, "default", "qqqqqqqqqssssqqqssss"},
                                             {1, 7, "avx2", "qqqqssq"},
                                             {1, 7, "default", "ssssssq"}}) {
    CAPTURE(p.m);
    CAPTURE(p.n);
    CAPTURE(p.capability);
    const auto count = static_cast<std::size_t>(p.m * p.n);
    std::vector<float> x(count);
    for (std::size_t i = 0; i < count; ++i) x[i] = float_from_bits(payloads[i % 6]);
    Case in;
    in.metadata = {{"format", "coat.fake.symm"},
                   {"params", nlohmann::json{{"fp8", "e4m3"}, {"model", "interpreter"}, {"row_block", 1}, {"col_block", 1},
                                             {"epsilon", 1e-8}, {"cpu_capability", p.capability}}.dump()}};
    in.add(Tensor::from_f32("input", {p.m, p.n}, x));
    const Case out = run_reference(*find_format("coat.fake.symm"), in);
    for (std::size_t i = 0; i < count; ++i) {
      CAPTURE(i);
      CHECK(bits(out.require("scale").f32()[i]) == f32_bits(0x7FC00000u));
      CHECK(bits(out.require("q").f32()[i]) == f32_bits(q_of[i % 6]));
      CHECK(bits(out.require("rq").f32()[i]) == f32_bits(p.rq[i] == 'q' ? q_of[i % 6] : 0x7FC00000u));
    }
  }
}
