// The round-trip audit (docs/audit.md) through the registry's round-trip hooks: its measures on tiny
// inputs whose dequantized values are derived by hand from the codebooks and the E4M3 grid,
// bitsandbytes' own numbers, byte-identical results for any thread count, the rejection of bad
// inputs; the input specs it shares with golden generate; the trajectory study's optimizer runs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bits_printer.hpp"
#include "elementwise.hpp"
#include "lowbit/audit.hpp"
#include "lowbit/audit_budget.hpp"
#include "lowbit/audit_exact.hpp"
#include "lowbit/audit_storage.hpp"
#include "lowbit/audit_trajectory.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/generators.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

bool same(const audit::Metrics& a, const audit::Metrics& b) {
  const auto eq = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  return a.n == b.n && a.blocks == b.blocks && a.is_signed == b.is_signed && eq(a.mean_abs, b.mean_abs) &&
         eq(a.mean_rel, b.mean_rel) && eq(a.rel_l2, b.rel_l2) && eq(a.max_abs, b.max_abs) && eq(a.sqnr_db, b.sqnr_db) &&
         a.nonzeros == b.nonzeros && a.flushed == b.flushed && eq(a.flushed_fraction, b.flushed_fraction) &&
         a.worst_block == b.worst_block && eq(a.worst_block_mean_abs, b.worst_block_mean_abs);
}

const FormatSpec& format(const std::string& name) {
  const FormatSpec* f = find_format(name);
  REQUIRE_MESSAGE(f, name);
  return *f;
}

std::vector<std::string> names(const std::vector<const FormatSpec*>& formats) {
  std::vector<std::string> out;
  for (const FormatSpec* f : formats) out.push_back(f->name);
  return out;
}

}  // namespace

TEST_CASE("fp8.perblock.e4m3: every measure on two hand-checked blocks of 16") {
  // Block 0: amax 448, so the scale is exactly 1 and E4M3's grid applies directly: spacing 1/8 on
  // [1, 2) and 1/4 on [2, 4); 1.0625 and 1.1875 are ties (to even: 1.0 and 1.25), -2.0625 rounds to -2.
  // Block 1: amax 448 again; 2^-10 is half the smallest subnormal 2^-9, a tie to even: flushed to 0.
  const FormatSpec& f = format("fp8.perblock.e4m3");
  std::vector<float> x(32, 0.0f);
  x[0] = 448.0f, x[1] = 1.0625f, x[2] = 1.1875f, x[3] = 3.0f, x[4] = -2.0625f;
  x[16] = 448.0f, x[17] = 0x1.0p-10f;
  std::vector<float> expected = x;
  expected[1] = 1.0f, expected[2] = 1.25f, expected[4] = -2.0f, expected[17] = 0.0f;
  CHECK(same_values(audit::round_trip(f, x, 16), expected));

  const audit::Metrics m = audit::audit(f, x, 16);
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

TEST_CASE("torchao.codebook8.signed and bnb.blockwise8.dynamic: dequantized values are the codebook entries") {
  const std::vector<float> q = codebook::signed8();
  // amax 1 (q[255] is 1), so the scale is 1: a value a quarter of the way from q[200] to q[201]
  // comes back as q[200]; an entry comes back as itself.
  std::vector<float> x(16, 0.0f);
  x[0] = 1.0f;
  x[1] = 0.75f * q[200] + 0.25f * q[201];
  x[2] = q[37];
  x[3] = -0.5f;
  for (const std::string name : {"torchao.codebook8.signed", "bnb.blockwise8.dynamic"}) {
    const FormatSpec& f = format(name);
    const bool bnb = name.starts_with("bnb");
    const std::size_t block = bnb ? 64 : 16;
    std::vector<float> xb(block, 0.0f);
    std::copy(x.begin(), x.end(), xb.begin());
    const std::vector<float> r = audit::round_trip(f, xb, block);
    CAPTURE(name);
    CHECK(value(r[0]) == value(1.0f));
    CHECK(value(r[1]) == value(q[200]));
    CHECK(value(r[2]) == value(q[37]));
    // A zero: torchao's search gives the entry 0 itself; bitsandbytes' CPU table looks 0 up at index
    // round(0.5 * 65535 + 0.5) = 32768, the value -1 + 2 * 32768 / 65535 > 0, whose code is the
    // number of midpoints below it: not the zero entry (the CPU path does not keep zeros).
    float zero_back = 0.0f;
    if (bnb) {
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
}

TEST_CASE("unsigned formats: exact on their own entries, n/a on data with a negative value") {
  const FormatSpec& u8 = format("torchao.codebook8.unsigned");
  const std::vector<float> u = codebook::unsigned8();
  std::vector<float> v(16, 0.0f);
  v[0] = 1.0f, v[1] = u[100], v[2] = u[3];
  const audit::Metrics m = audit::audit(u8, v, 16);
  CHECK_FALSE(m.is_signed);
  CHECK(value(m.mean_abs) == value(0.0));
  CHECK(is_inf(m.sqnr_db));
  CHECK(m.flushed == 0);

  v[5] = -0.25f;
  for (const std::string name : {"torchao.codebook8.unsigned", "torchao.codebook4.unsigned"}) {
    CAPTURE(name);
    CHECK(audit::not_applicable(format(name), 16, true) == "n/a (unsigned map: the data has negative values)");
    CHECK(audit::not_applicable(format(name), 16, false) == "");
    CHECK_THROWS_WITH_AS(audit::audit(format(name), v, 16), doctest::Contains("unsigned map"), std::invalid_argument);
  }
  // -0.0 is not negative
  v[5] = -0.0f;
  CHECK(value(audit::audit(u8, v, 16).mean_abs) == value(0.0));
  CHECK(audit::not_applicable(format("torchao.codebook8.signed"), 16, true) == "");
}

TEST_CASE("torchao formats zero-pad a partial tail block") {
  const std::vector<float> x = audit::make_input("normal:n=20,seed=5");
  const std::vector<float> r = audit::round_trip(format("torchao.codebook4.signed"), x, 16);
  REQUIRE(r.size() == 20);
  std::vector<float> tail(16, 0.0f);
  std::copy(x.begin() + 16, x.end(), tail.begin());
  const auto map = codebook::torchao_signed4();
  const auto q = blockwise::torchao_quantize(tail, map, 16);
  const auto d = blockwise::torchao_dequantize(q.codes, q.scale, map, 16);
  for (std::size_t i = 0; i < 4; ++i) CHECK(value(r[16 + i]) == value(d[i]));
}

TEST_CASE("bnb.blockwise8.dynamic reproduces bitsandbytes 0.50.2's own mean absolute error on randn") {
  // bitsandbytes 0.50.2 quantize_blockwise / dequantize_blockwise (CPU) on the values of
  // normal:n=1048576,seed=1, mean |A - A^| as torch sums it; our sum is in double, in block order.
  const std::vector<float> x = audit::make_input("normal:n=1048576,seed=1");
  const FormatSpec& f = format("bnb.blockwise8.dynamic");
  CHECK(value(audit::audit(f, x, 64, 2).mean_abs) == doctest::Approx(0.007520006003266421).epsilon(1e-9));
  CHECK(value(audit::audit(f, x, 256, 2).mean_abs) == doctest::Approx(0.008521398173585177).epsilon(1e-9));
  CHECK(value(audit::audit(f, x, 4096, 2).mean_abs) == doctest::Approx(0.00997950190681959).epsilon(1e-9));
}

TEST_CASE("the measures are the same bytes for 1 and 2 threads, for every format with a round trip") {
  // More than one chunk (2^18 elements), with a partial tail block.
  std::vector<float> x = audit::make_input("student-t:n=600037,seed=9");
  const std::vector<float> v = audit::make_input("adam-v:n=300000,seed=2,steps=3");
  const std::vector<const FormatSpec*> all = audit::formats();
  CHECK(all.size() >= 10);
  for (const auto& data : {x, v})
    for (const FormatSpec* f : all)
      for (std::size_t block : {std::size_t{128}, std::size_t{4096}}) {
        const bool negative = std::any_of(data.begin(), data.end(), [](float e) { return e < 0.0f; });
        if (!audit::not_applicable(*f, block, negative).empty()) continue;
        CAPTURE(f->name);
        CAPTURE(block);
        CHECK(same(audit::audit(*f, data, block, 1), audit::audit(*f, data, block, 2)));
        CHECK(same_values(audit::round_trip(*f, data, block, 1), audit::round_trip(*f, data, block, 2)));
      }
  // measure() agrees with a plain serial computation.
  const FormatSpec& t8 = format("torchao.codebook8.signed");
  const std::vector<float> r = audit::round_trip(t8, x, 256, 2);
  double abs = 0, err2 = 0, x2 = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double e = std::fabs(static_cast<double>(x[i]) - r[i]);
    abs += e, err2 += e * e, x2 += static_cast<double>(x[i]) * x[i];
  }
  const audit::Metrics m = audit::measure(x, r, 256, 2);
  CHECK(value(m.mean_abs) == doctest::Approx(abs / static_cast<double>(x.size())).epsilon(1e-12));
  CHECK(value(m.sqnr_db) == doctest::Approx(10 * std::log10(x2 / err2)).epsilon(1e-12));
  CHECK(same(m, audit::audit(t8, x, 256, 1)));
}

TEST_CASE("bits per element: what each library stores, derived by hand, at two block sizes each") {
  // The storage of one quantized tensor of n elements, as each library allocates it (torchao 0.18
  // optim/subclass_8bit.py, subclass_4bit.py, subclass_fp8.py; bitsandbytes 0.50 functional.py
  // quantize_blockwise's QuantState; COAT 80ec99f coat/optimizer/fp8_adamw.py), in bits:
  //   torchao 8-bit:  uint8 codes per element, float32 scale per block, float32 qmap of 256
  //   torchao 4-bit:  uint8 codes two per byte (numel / 2), float32 scale per block, qmap of 16;
  //                   the audit pads a partial tail block to a whole one, and the padding is stored
  //   torchao FP8:    float8_e4m3fn codes per element, float32 scale per block
  //   bitsandbytes:   uint8 codes per element, float32 absmax per block (partial tail: one more), code of 256
  //   COAT:           e4m3 codes per element, float32 scale per group of 128 (expansion: also k and
  //                   the centre, float32 per group)
  struct Expected {
    const char* format;
    std::size_t n, block;
    double bits;
  };
  const auto blocks = [](std::size_t n, std::size_t b) { return static_cast<double>((n + b - 1) / b); };
  const std::vector<Expected> table = {
      {"torchao.codebook8.signed", 4096, 32, 8.0 * 4096 + 32 * 128 + 32 * 256},
      {"torchao.codebook8.unsigned", 4096, 256, 8.0 * 4096 + 32 * 16 + 32 * 256},
      {"torchao.codebook4.signed", 4096, 128, 4.0 * 4096 + 32 * 32 + 32 * 16},
      {"torchao.codebook4.unsigned", 4096, 2048, 4.0 * 4096 + 32 * 2 + 32 * 16},
      {"torchao.codebook4.signed", 1000, 128, 4.0 * 1024 + 32 * 8 + 32 * 16},  // padded to 8 blocks of 128
      {"torchao.fp8", 4096, 64, 8.0 * 4096 + 32 * 64},
      {"torchao.fp8", 1000, 256, 8.0 * 1024 + 32 * 4},
      {"bnb.blockwise8.dynamic", 4096, 64, 8.0 * 4096 + 32 * 64 + 32 * 256},
      {"bnb.blockwise8.dynamic", 1000, 4096, 8.0 * 1000 + 32 * 1 + 32 * 256},  // partial block, no padding
      {"bnb.blockwise8.linear", 1000, 64, 8.0 * 1000 + 32 * blocks(1000, 64) + 32 * 256},
      {"fp8.perblock.e4m3", 1000, 16, 8.0 * 1000 + 32 * blocks(1000, 16)},
      {"coat.optim.origin.e4m3", 4096, 128, 8.0 * 4096 + 32 * 32},
      {"coat.optim.origin.e4m3", 1000, 128, 8.0 * 1000 + 32 * 8},
      {"coat.optim.expand.e4m3", 4096, 128, 8.0 * 4096 + 3 * 32 * 32},
      {"coat.optim.expand.e4m3", 1000, 128, 8.0 * 1000 + 3 * 32 * 8},
  };
  for (const Expected& e : table) {
    CAPTURE(e.format);
    CAPTURE(e.n);
    CAPTURE(e.block);
    const audit::Storage s = audit::storage(format(e.format), e.n, e.block);
    CHECK(value(static_cast<double>(s.bits)) == value(e.bits));
    CHECK(value(s.bits_per_element) == value(e.bits / static_cast<double>(e.n)));
  }
  // the closed forms at n a multiple of the block: 8-bit 8 + 32/B + 8192/n, 4-bit 4 + 32/B + 512/n
  CHECK(value(audit::storage(format("torchao.codebook8.signed"), 1 << 20, 256).bits_per_element) ==
        value(8 + 32.0 / 256 + 8192.0 / (1 << 20)));
  CHECK(value(audit::storage(format("torchao.codebook4.signed"), 1 << 20, 32).bits_per_element) ==
        value(4 + 32.0 / 32 + 512.0 / (1 << 20)));
  // the stored tensors, named
  const audit::Storage t4 = audit::storage(format("torchao.codebook4.signed"), 4096, 128);
  REQUIRE(t4.tensors.size() == 3);
  CHECK(t4.tensors[0].name == "codes_packed");
  CHECK(t4.tensors[0].elements == 2048);
  CHECK(t4.tensors[1].name == "scale");
  CHECK(t4.tensors[2].name == "qmap");
  // audit() reports the same figure; a block size where the round trip does not run is refused
  const std::vector<float> x = audit::make_input("normal:n=4096,seed=3");
  CHECK(value(audit::audit(format("torchao.fp8"), x, 64).bits_per_element) == value(8.0 + 32.0 / 64));
  CHECK_THROWS_WITH_AS(audit::storage(format("coat.optim.expand.e4m3"), 4096, 256), doctest::Contains("COAT groups are 128"),
                       std::invalid_argument);
  CHECK_THROWS_AS(audit::storage(format("bnb.blockwise8.dynamic"), 4096, 32), std::invalid_argument);
  // every format with a round trip names what it stores, and each is sized
  for (const FormatSpec* f : audit::formats()) {
    CAPTURE(f->name);
    const std::size_t b = f->round_trip_blocks.min > 128 ? f->round_trip_blocks.min : 128;
    CHECK(audit::storage(*f, 4096, b).bits_per_element > 4.0);
  }
}

TEST_CASE("budget: the fewest bits per element within it, per input and overall, or none") {
  // Rows made by hand: the choice depends only on bits and the measure.
  const FormatSpec& a = format("torchao.codebook8.signed");
  const FormatSpec& b = format("torchao.codebook4.signed");
  const FormatSpec& c = format("torchao.fp8");
  const auto row = [](const std::string& in, const FormatSpec& f, std::size_t block, double bits, double rel_l2, std::size_t n) {
    audit::Row r{in, &f, block, "", {}};
    r.m.n = n, r.m.bits_per_element = bits, r.m.rel_l2 = rel_l2, r.m.sqnr_db = -20 * std::log10(rel_l2);
    return r;
  };
  std::vector<audit::Row> rows = {
      row("x", a, 256, 8.2, 0.010, 1000), row("x", a, 32, 9.1, 0.006, 1000), row("x", b, 128, 4.3, 0.15, 1000),
      row("x", c, 256, 8.125, 0.020, 1000),
      row("y", a, 256, 8.2, 0.030, 3000), row("y", a, 32, 9.1, 0.011, 3000), row("y", b, 128, 4.3, 0.012, 3000),
      row("y", c, 256, 8.125, 0.020, 3000),
  };
  rows.push_back({"y", &b, 64, "n/a (test)", {}});
  const audit::Budget budget = audit::parse_budget("rel_l2=0.02");
  CHECK(budget.metric == "rel_l2");
  CHECK(budget.text() == "rel_l2 <= 0.02");
  const std::vector<audit::Choice> choices = audit::choose(rows, budget);
  REQUIRE(choices.size() == 3);
  // x: 4-bit misses (0.15), fp8 at 256 (8.125 bits) meets it with fewer bits than 8-bit at 256
  CHECK(choices[0].input == "x");
  REQUIRE(choices[0].best);
  CHECK(choices[0].best->format == &c);
  CHECK(choices[0].candidates == 4);
  // y: 4-bit at 128 meets it (0.012)
  REQUIRE(choices[1].best);
  CHECK(choices[1].best->format == &b);
  CHECK(choices[1].best->block == 128);
  CHECK(choices[1].candidates == 4);
  // overall: 4-bit fails on x; fp8 at 256 meets both (0.020 each); 8-bit at 256 fails on y
  CHECK(choices[2].input.empty());
  REQUIRE(choices[2].best);
  CHECK(choices[2].best->format == &c);
  CHECK(choices[2].best->block == 256);
  CHECK(value(choices[2].best->m.bits_per_element) == value(8.125));
  CHECK(choices[2].candidates == 4);  // b at 64 did not run on x
  // tighter: only 8-bit at 32 meets 0.011 on both; overall bits are the element-weighted mean
  const auto tight = audit::choose(rows, audit::parse_budget("rel_l2_error=0.011"));
  REQUIRE(tight[2].best);
  CHECK(tight[2].best->format == &a);
  CHECK(tight[2].best->block == 32);
  CHECK(value(tight[2].best->m.rel_l2) == value(0.011));  // the worst input's
  // SQNR is a floor; a budget nothing meets
  const auto sq = audit::choose(rows, audit::parse_budget("sqnr_db=40"));
  REQUIRE(sq[0].best);
  CHECK(sq[0].best->format == &a);  // 8-bit: 40 dB at 256 (to rounding), 44 dB at 32; fp8 34 dB, 4-bit 16 dB
  const auto none = audit::choose(rows, audit::parse_budget("rel_l2=0.001"));
  for (const auto& ch : none) CHECK_FALSE(ch.best);
  CHECK_THROWS_WITH_AS(audit::parse_budget("l2=0.1"), doctest::Contains("unknown metric 'l2'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(audit::parse_budget("rel_l2"), doctest::Contains("METRIC=VALUE"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(audit::parse_budget("rel_l2=abc"), doctest::Contains("not a finite number"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(audit::parse_budget("rel_l2=nan"), doctest::Contains("not a finite number"), std::invalid_argument);
  CHECK_THROWS_AS(audit::parse_budget("rel_l2=-1"), std::invalid_argument);
}

TEST_CASE("already quantized: a state dequantized through the reference comes back unchanged at its own format and block") {
  const std::vector<float> x = audit::make_input("normal:n=10000,seed=4");
  const std::vector<float> head(x.begin(), x.begin() + 9984);  // 39 whole blocks of 256
  const auto find = [](const std::vector<audit::ExactRoundTrip>& list, const std::string& name, std::size_t block) {
    const auto it = std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.format->name == name && e.block_size == block; });
    return it == list.end() ? std::optional<audit::ExactRoundTrip>{} : std::optional<audit::ExactRoundTrip>{*it};
  };
  // torchao's signed 8-bit map runs from -0.99297 to 1: a block led by a positive value keeps its
  // absmax (q[255] = 1) and every code; one led by a negative value comes back with absmax 0.99297
  // times smaller and moves. So the blocks that come back unchanged are those led by a positive value.
  const std::vector<float> q8 = codebook::signed8();
  REQUIRE(value(q8[255]) == value(1.0f));
  REQUIRE(value(q8[0]) > value(-1.0f));
  const auto t8 = blockwise::torchao_quantize(head, q8, 256);
  const std::vector<float> state = blockwise::torchao_dequantize(t8.codes, t8.scale, q8, 256);
  std::size_t led_by_positive = 0;
  for (std::size_t b = 0; b < 39; ++b) {
    const auto first = state.begin() + static_cast<std::ptrdiff_t>(b * 256);
    led_by_positive += *std::max_element(first, first + 256, [](float a, float c) { return std::fabs(a) < std::fabs(c); }) > 0;
  }
  CHECK(led_by_positive > 10);
  CHECK(led_by_positive < 39);
  const auto exact = audit::exact_round_trips(state, audit::formats());
  const auto at256 = find(exact, "torchao.codebook8.signed", 256);
  REQUIRE(at256);
  CHECK(at256->blocks == 39);
  CHECK(at256->exact_blocks == led_by_positive);
  CHECK_FALSE(find(exact, "torchao.codebook8.signed", 128));  // its halves led by a positive absmax: half the share
  CHECK_FALSE(find(exact, "torchao.codebook8.signed", 512));
  CHECK_FALSE(find(exact, "torchao.codebook4.signed", 256));
  // and what the audit shows without the warning: the error at 256 far below its neighbours'
  const double e128 = audit::audit(format("torchao.codebook8.signed"), state, 128).rel_l2;
  const double e256 = audit::audit(format("torchao.codebook8.signed"), state, 256).rel_l2;
  CHECK(e256 < e128 / 1.5);
  // the unsigned map (0 .. 1) and per-block E4M3 (symmetric): every block comes back unchanged
  std::vector<float> magnitudes(head.size());
  std::transform(head.begin(), head.end(), magnitudes.begin(), [](float v) { return std::fabs(v); });
  const std::vector<float> u8 = codebook::unsigned8();
  const auto tu = blockwise::torchao_quantize(magnitudes, u8, 256);
  const auto u = find(audit::exact_round_trips(blockwise::torchao_dequantize(tu.codes, tu.scale, u8, 256), audit::formats()),
                      "torchao.codebook8.unsigned", 256);
  REQUIRE(u);
  CHECK(u->exact_blocks == 39);
  CHECK(u->blocks == 39);
  const auto f8 = blockwise::fp8_perblock_quantize(x, 64);
  const auto fp = find(audit::exact_round_trips(blockwise::fp8_perblock_dequantize(f8.codes, f8.scale, 64), audit::formats()),
                       "fp8.perblock.e4m3", 64);
  REQUIRE(fp);
  CHECK(fp->exact_blocks == (10000 + 63) / 64);
  // unquantized data: nothing; all zeros: nothing to tell
  CHECK(audit::exact_round_trips(x, audit::formats()).empty());
  CHECK(audit::exact_round_trips(std::vector<float>(512, 0.0f), audit::formats()).empty());
}

TEST_CASE("formats are selected by registry name and glob, as conform --format") {
  CHECK(names(audit::formats({"bnb.blockwise8.dynamic"})) == std::vector<std::string>{"bnb.blockwise8.dynamic"});
  CHECK(names(audit::formats({"torchao.codebook8.*"})) ==
        std::vector<std::string>{"torchao.codebook8.signed", "torchao.codebook8.unsigned"});
  const auto every = names(audit::formats());
  for (const char* n : {"torchao.codebook8.signed", "torchao.codebook4.unsigned", "torchao.fp8", "bnb.blockwise8.dynamic",
                        "fp8.perblock.e4m3", "coat.optim.origin.e4m3", "coat.optim.expand.e4m3"})
    CHECK(std::find(every.begin(), every.end(), n) != every.end());
  // a format without a round trip (an element-wise cast) is not an audit format
  CHECK(std::find(every.begin(), every.end(), "fp8.e4m3fn.satfinite") == every.end());
  CHECK_THROWS_WITH_AS(audit::formats({"torchao-8bit", "torchao.*"}),
                       doctest::Contains("no format matches 'torchao-8bit' (formats here: torchao.codebook8.signed"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(audit::formats({"fp8.e4m3fn.*"}), doctest::Contains("'fp8.e4m3fn.*'"), std::invalid_argument);
  CHECK(format("coat.optim.origin.e4m3").round_trip_blocks.refusal(64) == "n/a (COAT groups are 128)");
  CHECK(format("coat.optim.origin.e4m3").round_trip_blocks.refusal(128) == "");
  CHECK(format("bnb.blockwise8.dynamic").round_trip_blocks.refusal(32) == "n/a (bitsandbytes block sizes are 64..4096)");
  CHECK(format("bnb.blockwise8.dynamic").round_trip_blocks.refusal(4096) == "");
  CHECK(format("bnb.blockwise8.dynamic").round_trip_blocks.refusal(96) != "");  // not a power of two
}

TEST_CASE("bad inputs are rejected with a message naming the fault") {
  const std::vector<float> x(256, 1.0f);
  const FormatSpec& t8 = format("torchao.codebook8.signed");
  CHECK_THROWS_AS(audit::round_trip(t8, x, 48), std::invalid_argument);
  CHECK_THROWS_AS(audit::round_trip(t8, x, 8), std::invalid_argument);
  CHECK_THROWS_WITH_AS(audit::round_trip(format("coat.optim.origin.e4m3"), x, 64),
                       doctest::Contains("COAT groups are 128"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(audit::round_trip(format("fp8.e4m3fn.nan"), x, 64), doctest::Contains("has no round trip"),
                       std::invalid_argument);
  std::vector<float> bad(64, 1.0f);
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(audit::audit(format("fp8.perblock.e4m3"), bad, 64), doctest::Contains("NaN or infinite"),
                       std::invalid_argument);
  CHECK_THROWS_AS(audit::make_input("adam-m:n=10,bogus=1"), std::invalid_argument);
  CHECK_THROWS_AS(audit::make_input("adam-v:steps=0"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(audit::make_input("edges"), doctest::Contains("edges belong to one format"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(audit::make_input("laplace:n=4"), doctest::Contains("adam-m"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(audit::audit(format("fp8.perblock.e4m3"), audit::make_input("special"), 16),
                       doctest::Contains("NaN or infinite"), std::invalid_argument);
}

TEST_CASE("input specs: adam-m and adam-v are generator kinds; one step is the EMA of one gradient") {
  const std::vector<float> m = generate_inputs(parse_input_spec("adam-m:n=64,seed=4,steps=1"), FormatSpec{}, {});
  const std::vector<float> v = generate_inputs(parse_input_spec("adam-v:n=64,seed=4,steps=1"), FormatSpec{}, {});
  REQUIRE(m.size() == 64);
  for (std::size_t i = 0; i < 64; ++i) {
    const float g = m[i] / 0.1f;  // m = 0.1 g exactly up to one rounding
    CHECK(value(v[i]) >= value(0.0f));
    CHECK(value(static_cast<double>(v[i])) == doctest::Approx(0.001 * static_cast<double>(g) * g).epsilon(1e-5));
  }
  CHECK(same_values(audit::make_input("adam-m:n=64,seed=4,steps=1"), m));
  CHECK_THROWS_WITH_AS(parse_input_spec("adam-m:steps=2.5"), doctest::Contains("steps must be"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_input_spec("normal:steps=2"), doctest::Contains("takes no 'steps'"), std::invalid_argument);
}

// The generators' values, bit for bit: golden generate's cases, verify's battery and every audit
// figure depend on them. Pinned from the generator as it was before its draws and its transforms were
// split so that threads make the values (the one loop of commit 8575585, through lowbit golden
// generate): every kind that draws, at both ends and in the middle; outliers at an outlier.
TEST_CASE("input specs: the generated values are pinned bit for bit, and the same for any thread count") {
  struct Pin {
    const char* spec;
    std::size_t n;
    std::vector<std::pair<std::size_t, std::uint32_t>> bits;
  };
  const std::vector<Pin> pins = {
      {"normal:n=300001,std=0.01,mean=0.5", 300001, {{0, 0x3f00e607}, {1, 0x3f02c7af}, {150000, 0x3f00e6d9}, {300000, 0x3f009a5c}}},
      {"uniform:n=100000,seed=3", 100000, {{0, 0x3df0b49b}, {1, 0xbf1bc4da}, {50000, 0xbf706396}, {99999, 0x3f45061f}}},
      {"lognormal:n=100003", 100003, {{0, 0x400122e2}, {1, 0xbf488764}, {50001, 0xc156656b}, {100002, 0xbe93e445}}},
      {"student-t:n=65536,nu=4", 65536, {{0, 0xbf800de8}, {1, 0xbef9ea1f}, {32768, 0xbf7c5dd6}, {65535, 0xbe89d9e2}}},
      {"outliers:n=70000", 70000, {{0, 0x3eb3b54a}, {1, 0x3f8b003e}, {128, 0xc5bc0523}, {69760, 0xc5adffc1}, {69999, 0x3f1ee782}}},
      {"adam-m:n=5000", 5000, {{0, 0x39b832ec}, {1, 0x3a7a1e0a}, {2500, 0xba99f9f3}, {4999, 0x37947bec}}},
      {"adam-v:n=5000", 5000, {{0, 0x3261a4b1}, {1, 0x34406141}, {2500, 0x348f33d3}, {4999, 0x30e55d20}}},
      {"constant:n=1000", 1000, {{0, 0x3f800000}, {999, 0x3f800000}}},
  };
  for (const Pin& p : pins) {
    CAPTURE(p.spec);
    const std::vector<float> one = generate_inputs(parse_input_spec(p.spec), FormatSpec{}, nlohmann::json::object(), 1);
    REQUIRE(one.size() == p.n);
    for (const auto& pinned : p.bits) {
      const auto i = pinned.first;  // not a structured binding: CAPTURE's lambda cannot take one in clang < 16
      CAPTURE(i);
      CHECK(bits(one[i]) == f32_bits(pinned.second));
    }
    CHECK(same_bits(generate_inputs(parse_input_spec(p.spec), FormatSpec{}, nlohmann::json::object(), 3), one));
  }
  // A mutant the pins catch: Box-Muller with its two draws swapped (u1 from the second)
  std::mt19937_64 rng(1);
  const double u2 = unit_uniform(rng), u1 = 1.0 - unit_uniform(rng);
  const float swapped = static_cast<float>(0.5 + 0.01 * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  CHECK(bits(swapped) != f32_bits(0x3f00e607u));
}

TEST_CASE("input specs: special and edges take n (the list's first n values, repeated from its start)") {
  const FormatSpec& cast = format("fp8.e4m3fn.satfinite");
  const nlohmann::json params = resolve_params(cast, {});
  const std::vector<float> special = generate_inputs(parse_input_spec("special"), FormatSpec{}, {});
  const std::vector<float> edges = generate_inputs(parse_input_spec("edges"), cast, params);
  REQUIRE(special.size() == 18);  // the list in generators.cpp: +-0, +-denorm_min, ..., +-1e30
  CHECK(edges.size() > 1000);
  // shorter: a prefix
  const std::vector<float> s5 = generate_inputs(parse_input_spec("special:n=5"), FormatSpec{}, {});
  REQUIRE(s5.size() == 5);
  for (std::size_t i = 0; i < 5; ++i) CHECK(bits(s5[i]) == bits(special[i]));
  CHECK(std::signbit(s5[1]));  // -0.0 kept
  // longer: the list again from its start (index 18 is +0.0 again, 19 -0.0, 26 +Inf: special[8])
  const std::vector<float> s40 = generate_inputs(parse_input_spec("special:n=40"), FormatSpec{}, {});
  REQUIRE(s40.size() == 40);
  for (std::size_t i = 0; i < 40; ++i) CHECK(bits(s40[i]) == bits(special[i % 18]));
  CHECK(is_inf(s40[26]));
  const std::vector<float> e3 = generate_inputs(parse_input_spec("edges:n=3"), cast, params);
  REQUIRE(e3.size() == 3);
  CHECK(bits(e3[0]) == bits(0.0f));  // the first edge of E4M3FN: code 0x00's value, then the midpoint to 0x01 (2^-10) and below it
  CHECK(bits(e3[1]) == bits(std::nextafter(0x1.0p-10f, -1.0f)));
  CHECK(bits(e3[2]) == bits(0x1.0p-10f));
  CHECK(generate_inputs(parse_input_spec("edges:n=0"), cast, params).empty());
  CHECK_THROWS_AS(parse_input_spec("special:n=-1"), std::invalid_argument);
}

TEST_CASE("special on a whole-block format: the 18 values, then +0.0 to a whole block; with n as asked") {
  const std::vector<float> special = generate_inputs(parse_input_spec("special"), FormatSpec{}, {});
  for (const char* name : {"torchao.codebook8.signed", "torchao.codebook4.unsigned", "torchao.fp8"}) {
    CAPTURE(name);
    const FormatSpec& f = format(name);
    const nlohmann::json params = resolve_params(f, {});
    const std::size_t block = positive_size_param(params, "block_size");
    const std::vector<float> padded = generate_inputs(parse_input_spec("special"), f, params);
    REQUIRE(padded.size() == block);  // 256 or 128: one block
    CHECK(special_padding(parse_input_spec("special"), f, params) == block - 18);
    for (std::size_t i = 0; i < padded.size(); ++i) CHECK(bits(padded[i]) == (i < 18 ? bits(special[i]) : bits(0.0f)));
    // another block size pads to it; n is taken as given, and the reference names the rule it breaks
    CHECK(generate_inputs(parse_input_spec("special"), f, resolve_params(f, {{"block_size", 32}})).size() == 32);
    CHECK(generate_inputs(parse_input_spec("special:n=20"), f, params).size() == 20);
    std::string message;
    for_each_case(f, params, parse_input_spec("special:n=20"), 1, {"lowbit test", "test"}, [&](CaseToRun c) {
      CHECK_THROWS_WITH_AS(run_reference(f, c.inputs), doctest::Contains("quantizes whole blocks only: 20 elements is not "
                                                                          "a multiple of block size"), CaseError);
      return Case{};
    });
    // the padded case runs, and says so in its input metadata
    for_each_case(f, params, parse_input_spec("special"), 1, {"lowbit test", "test"}, [&](CaseToRun c) {
      CHECK(c.stem == "special");
      CHECK(c.described == "special (padded with " + std::to_string(block - 18) + " zeros to a whole block of " +
                               std::to_string(block) + ": " + name + " quantizes whole blocks only)");
      CHECK(c.inputs.metadata.at("input") == c.described);
      const Case out = run_reference(f, c.inputs);
      CHECK(out.require("scale").element_count() == 1);
      CHECK(std::isnan(out.require("scale").value_as_float(0)));  // the 18 values' NaN decides the block
      return out;
    });
  }
  // a format that takes any length is not padded
  const FormatSpec& bnb = format("bnb.blockwise8.dynamic");
  CHECK(generate_inputs(parse_input_spec("special"), bnb, resolve_params(bnb, {})).size() == 18);
}

TEST_CASE("trajectory: every optimizer format from the registry, deterministic, each first step moves by lr") {
  const auto formats = names(audit::trajectory_formats());
  for (const char* n : {"torchao.adam.dense", "torchao.adam.codebook8", "torchao.adam.codebook4", "torchao.adam.fp8",
                        "bnb.adam8bit.cpu", "coat.optim.origin.e4m3", "coat.optim.expand.e4m3"})
    CHECK(std::find(formats.begin(), formats.end(), n) != formats.end());
  CHECK_THROWS_WITH_AS(audit::trajectory_formats({"torchao.codebook8.signed"}), doctest::Contains("no format matches"),
                       std::invalid_argument);

  const FormatSpec& dense = format(audit::kTrajectoryBaseline);
  const auto a = audit::run_trajectory(3, dense, 40, 1e-2);
  const auto b = audit::run_trajectory(3, dense, 40, 1e-2);
  REQUIRE(a.size() == 41);
  CHECK(same_bits(a.back().w, b.back().w));  // the same bits, run after run
  CHECK(value(a.back().loss) < value(a.front().loss * 0.75));  // 184 -> 93 in 40 steps on seed 3
  const auto q = audit::run_trajectory(3, format("torchao.adam.codebook8"), 40, 1e-2);
  CHECK(value(q.front().loss) == value(a.front().loss));
  CHECK_FALSE(same_values(q.back().w, a.back().w));
  // Adam's first step from zero moments is lr * g / (|g| + eps) after bias correction: every
  // parameter (from 0) moves by lr up to a factor 1 - eps / |g|, whatever the state format stores
  // afterwards; so the study's lr reaches each format. bitsandbytes' other rules: Lion's sign and
  // Adagrad's g / (|g| + eps) move by lr too; AdEMAMix by lr (1 + alpha (1 - beta3)) (its slow EMA is
  // not bias-corrected: 1.0005 at the defaults), RMSprop by lr / sqrt(1 - alpha) (10 at alpha 0.99);
  // SGD with momentum by lr |g|, no fixed length, so it is not among them.
  auto first_step = [](const std::string& name) {
    const nlohmann::json& d = format(name).default_params;
    if (name.starts_with("bnb.ademamix8bit."))
      return 1e-2 * (1.0 + d.at("alpha").get<double>() * (1.0 - d.at("beta3").get<double>()));
    if (name.starts_with("bnb.rmsprop8bit.")) return 1e-2 / std::sqrt(1.0 - d.at("alpha").get<double>());
    return 1e-2;
  };
  for (const std::string& name : formats) {
    if (name.starts_with("bnb.momentum8bit.")) continue;  // the CPU format and the CUDA kernel's
    CAPTURE(name);
    const auto run = audit::run_trajectory(3, format(name), 1, 1e-2);
    REQUIRE(run.size() == 2);
    const auto lr = static_cast<float>(first_step(name));
    std::size_t off = 0, beyond = 0;
    for (float w : run[1].w) {
      off += std::fabs(std::fabs(w) - lr) > lr * 1e-3f ? 1 : 0;  // |g| below ~1e3 eps: a shorter step
      beyond += std::fabs(w) > lr * (1 + 1e-6f) || w == 0.0f ? 1 : 0;  // never longer than that, never none
    }
    CHECK(beyond == 0);
    // seed 3 has 4 gradients below 1e-5 (steps 0.0086 to 0.00999); RMSprop's eps weighs against 0.1 |g|,
    // ten times as much: 50 of its 4 096 steps are shorter by more than 1e-3 (seen), none longer
    CHECK(off <= (name.starts_with("bnb.rmsprop8bit.") ? 50u : 8u));
  }
}
