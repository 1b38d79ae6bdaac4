// The round-trip audit (docs/audit.md): its measures on tiny inputs whose dequantized values are
// derived by hand from the codebooks and the E4M3 grid, byte-identical results for any thread
// count, and the rejection of bad inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "bits_printer.hpp"
#include "elementwise.hpp"
#include "lowbit/audit.hpp"
#include "lowbit/audit_trajectory.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"

using namespace lowbit;
using audit::Format;
using namespace lowbit::test;

namespace {

bool same(const audit::Metrics& a, const audit::Metrics& b) {
  const auto eq = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  return a.n == b.n && a.blocks == b.blocks && a.is_signed == b.is_signed && eq(a.mean_abs, b.mean_abs) &&
         eq(a.mean_rel, b.mean_rel) && eq(a.rel_l2, b.rel_l2) && eq(a.max_abs, b.max_abs) && eq(a.sqnr_db, b.sqnr_db) &&
         a.nonzeros == b.nonzeros && a.flushed == b.flushed && eq(a.flushed_fraction, b.flushed_fraction) &&
         a.worst_block == b.worst_block && eq(a.worst_block_mean_abs, b.worst_block_mean_abs);
}

}  // namespace

TEST_CASE("fp8-perblock: every measure on two hand-checked blocks of 16") {
  // Block 0: amax 448, so the scale is exactly 1 and E4M3's grid applies directly: spacing 1/8 on
  // [1, 2) and 1/4 on [2, 4); 1.0625 and 1.1875 are ties (to even: 1.0 and 1.25), -2.0625 rounds to -2.
  // Block 1: amax 448 again; 2^-10 is half the smallest subnormal 2^-9, a tie to even: flushed to 0.
  std::vector<float> x(32, 0.0f);
  x[0] = 448.0f, x[1] = 1.0625f, x[2] = 1.1875f, x[3] = 3.0f, x[4] = -2.0625f;
  x[16] = 448.0f, x[17] = 0x1.0p-10f;
  std::vector<float> expected = x;
  expected[1] = 1.0f, expected[2] = 1.25f, expected[4] = -2.0f, expected[17] = 0.0f;
  CHECK(same_values(audit::round_trip(Format::Fp8PerBlock, x, 16), expected));

  const audit::Metrics m = audit::audit(Format::Fp8PerBlock, x, 16);
  const double e = 0.0625, tiny = 0x1.0p-10;
  CHECK(m.n == 32);
  CHECK(m.blocks == 2);
  CHECK(m.is_signed);
  CHECK(value(m.mean_abs) == doctest::Approx((3 * e + tiny) / 32).epsilon(1e-15));
  const double rel = e / std::fabs(1.0625 + 1e-8) + e / std::fabs(1.1875 + 1e-8) + e / std::fabs(-2.0625 + 1e-8) +
                     tiny / std::fabs(tiny + 1e-8);
  CHECK(value(m.mean_rel) == doctest::Approx(rel / 32).epsilon(1e-15));
  const double x2 = 2 * 448.0 * 448.0 + 1.0625 * 1.0625 + 1.1875 * 1.1875 + 9.0 + 2.0625 * 2.0625 + tiny * tiny;
  const double e2 = 3 * e * e + tiny * tiny;
  CHECK(value(m.rel_l2) == doctest::Approx(std::sqrt(e2 / x2)).epsilon(1e-14));
  CHECK(value(m.sqnr_db) == doctest::Approx(10 * std::log10(x2 / e2)).epsilon(1e-14));
  CHECK(value(m.max_abs) == value(e));
  CHECK(m.nonzeros == 7);
  CHECK(m.flushed == 1);
  CHECK(value(m.flushed_fraction) == doctest::Approx(1.0 / 7));
  CHECK(m.worst_block == 0);
  CHECK(value(m.worst_block_mean_abs) == doctest::Approx(3 * e / 16).epsilon(1e-15));
}

TEST_CASE("torchao-8bit and bnb-8bit: dequantized values are the codebook entries derived by hand") {
  const std::vector<float> q = codebook::signed8();
  // amax 1 (q[255] is 1), so the scale is 1: a value a quarter of the way from q[200] to q[201]
  // comes back as q[200]; an entry comes back as itself.
  std::vector<float> x(16, 0.0f);
  x[0] = 1.0f;
  x[1] = 0.75f * q[200] + 0.25f * q[201];
  x[2] = q[37];
  x[3] = -0.5f;  // signed data: the signed map
  for (Format f : {Format::Torchao8, Format::Bnb8}) {
    const std::size_t block = f == Format::Bnb8 ? 64 : 16;
    std::vector<float> xb(block, 0.0f);
    std::copy(x.begin(), x.end(), xb.begin());
    const std::vector<float> r = audit::round_trip(f, xb, block);
    CAPTURE(audit::format_name(f));
    CHECK(value(r[0]) == value(1.0f));
    CHECK(value(r[1]) == value(q[200]));
    CHECK(value(r[2]) == value(q[37]));
    // A zero: torchao's search gives the entry 0 itself; bitsandbytes' CPU table looks 0 up at index
    // round(0.5 * 65535 + 0.5) = 32768, the value -1 + 2 * 32768 / 65535 > 0, whose code is the
    // number of midpoints below it: not the zero entry (the CPU path does not keep zeros).
    float zero_back = 0.0f;
    if (f == Format::Bnb8) {
      const float v = -1.0f + (2.0f * 32768.0f) / 65535.0f;
      std::size_t code = 0;
      while (code + 1 < q.size() && 0.5f * (q[code] + q[code + 1]) < v) ++code;
      zero_back = q[code];
      CHECK(value(zero_back) > value(0.0f));
    }
    for (std::size_t i = 4; i < block; ++i) CHECK(value(r[i]) == value(zero_back));
    const audit::Metrics m = audit::audit(f, xb, block);
    const double err = std::fabs(static_cast<double>(x[1]) - q[200]) + std::fabs(-0.5 - static_cast<double>(r[3])) +
                       static_cast<double>(block - 4) * zero_back;
    CHECK(value(m.mean_abs) == doctest::Approx(err / static_cast<double>(block)).epsilon(1e-14));
    CHECK(m.flushed == 0);
  }
  // Non-negative data: the unsigned map, whose entries come back exactly (zero error, infinite SQNR).
  const std::vector<float> u = codebook::unsigned8();
  std::vector<float> v(16, 0.0f);
  v[0] = 1.0f, v[1] = u[100], v[2] = u[3];
  const audit::Metrics m = audit::audit(Format::Torchao8, v, 16);
  CHECK_FALSE(m.is_signed);
  CHECK(value(m.mean_abs) == value(0.0));
  CHECK(is_inf(m.sqnr_db));
  CHECK(m.flushed == 0);
}

TEST_CASE("torchao formats zero-pad a partial tail block") {
  const std::vector<float> x = audit::make_input("normal:n=20,seed=5");
  const std::vector<float> r = audit::round_trip(Format::Torchao4, x, 16);
  REQUIRE(r.size() == 20);
  std::vector<float> tail(16, 0.0f);
  std::copy(x.begin() + 16, x.end(), tail.begin());
  const auto map = codebook::torchao_signed4();
  const auto q = blockwise::torchao_quantize(tail, map, 16);
  const auto d = blockwise::torchao_dequantize(q.codes, q.scale, map, 16);
  for (std::size_t i = 0; i < 4; ++i) CHECK(value(r[16 + i]) == value(d[i]));
}

TEST_CASE("the measures are the same bytes for 1 and 2 threads") {
  // More than one chunk (2^18 elements), with a partial tail block.
  std::vector<float> x = audit::make_input("student-t:n=600037,seed=9");
  const std::vector<float> v = audit::make_input("adam-v:n=300000,seed=2,steps=3");
  for (const auto& data : {x, v})
    for (const auto& info : audit::formats())
      for (std::size_t block : {std::size_t{128}, std::size_t{4096}}) {
        if (!audit::unsupported_reason(info.id, block).empty()) continue;
        CAPTURE(info.name);
        CAPTURE(block);
        CHECK(same(audit::audit(info.id, data, block, 1), audit::audit(info.id, data, block, 2)));
        CHECK(same_values(audit::round_trip(info.id, data, block, 1), audit::round_trip(info.id, data, block, 2)));
      }
  // measure() agrees with a plain serial computation.
  const std::vector<float> r = audit::round_trip(Format::Torchao8, x, 256, 2);
  double abs = 0, err2 = 0, x2 = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double e = std::fabs(static_cast<double>(x[i]) - r[i]);
    abs += e, err2 += e * e, x2 += static_cast<double>(x[i]) * x[i];
  }
  const audit::Metrics m = audit::measure(x, r, 256, 2);
  CHECK(value(m.mean_abs) == doctest::Approx(abs / static_cast<double>(x.size())).epsilon(1e-12));
  CHECK(value(m.sqnr_db) == doctest::Approx(10 * std::log10(x2 / err2)).epsilon(1e-12));
  CHECK(same(m, audit::audit(Format::Torchao8, x, 256, 1)));
}

TEST_CASE("synthetic Adam moments: one step is the EMA of one gradient") {
  const std::vector<float> m = audit::make_input("adam-m:n=64,seed=4,steps=1");
  const std::vector<float> v = audit::make_input("adam-v:n=64,seed=4,steps=1");
  REQUIRE(m.size() == 64);
  for (std::size_t i = 0; i < 64; ++i) {
    const float g = m[i] / 0.1f;  // m = 0.1 g exactly up to one rounding
    CHECK(value(v[i]) >= value(0.0f));
    CHECK(value(static_cast<double>(v[i])) == doctest::Approx(0.001 * static_cast<double>(g) * g).epsilon(1e-5));
  }
  CHECK(same_values(audit::make_input("adam-m:n=64,seed=4,steps=1"), m));
}

TEST_CASE("bad inputs are rejected with a message naming the fault") {
  CHECK_THROWS_WITH_AS(audit::parse_format("int8"), doctest::Contains("known: torchao-8bit"), std::invalid_argument);
  const std::vector<float> x(256, 1.0f);
  CHECK_THROWS_AS(audit::round_trip(Format::Torchao8, x, 48), std::invalid_argument);
  CHECK_THROWS_AS(audit::round_trip(Format::Torchao8, x, 8), std::invalid_argument);
  CHECK_THROWS_WITH_AS(audit::round_trip(Format::Coat, x, 64), doctest::Contains("COAT groups are 128"),
                       std::invalid_argument);
  CHECK(audit::unsupported_reason(Format::CoatExpand, 256) == "n/a (COAT groups are 128)");
  CHECK(audit::unsupported_reason(Format::Bnb8, 32) != "");
  CHECK(audit::unsupported_reason(Format::Bnb8, 4096) == "");
  std::vector<float> bad(64, 1.0f);
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(audit::audit(Format::Fp8PerBlock, bad, 64), doctest::Contains("NaN or infinite"),
                       std::invalid_argument);
  CHECK_THROWS_AS(audit::make_input("adam-m:n=10,bogus=1"), std::invalid_argument);
  CHECK_THROWS_AS(audit::make_input("adam-v:steps=0"), std::invalid_argument);
  CHECK_THROWS_AS(audit::make_input("edges"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(audit::make_input("laplace:n=4"), doctest::Contains("adam-m"), std::invalid_argument);
}

TEST_CASE("trajectory: deterministic runs, fp32 AdamW converges, unknown variants rejected") {
  const auto a = audit::run_trajectory_variant(3, "fp32", 40, 1e-2);
  const auto b = audit::run_trajectory_variant(3, "fp32", 40, 1e-2);
  REQUIRE(a.size() == 41);
  CHECK(same_values(a.back().w, b.back().w));  // the same bits, run after run
  CHECK(value(a.back().loss) < value(a.front().loss * 0.75));  // 184 -> 93 in 40 steps on seed 3
  // a quantized variant starts from the same point and moves away from the float32 run
  const auto q = audit::run_trajectory_variant(3, "torchao-8bit", 40, 1e-2);
  CHECK(value(q.front().loss) == value(a.front().loss));
  CHECK_FALSE(same_values(q.back().w, a.back().w));
  CHECK_THROWS_AS(audit::run_trajectory_variant(3, "fp64", 1, 1e-2), std::invalid_argument);
}
