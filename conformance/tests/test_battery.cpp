// The default battery's inputs at a block's own decision points (issue 28 item 1): the lookup table's
// cell boundaries of bitsandbytes' CPU back end, tiny and subnormal absmaxes, blocks of one special
// value with a last block ending on its largest value, and the other block sizes each format takes.
// Each input is checked against what it claims, with the table's index recomputed here in double from
// its definition (docs/formats/bnb-blockwise8.md), not with the reference's; that the reference and
// bitsandbytes' own library agree on them is test_bnb_cpu_verify's, that they catch their bugs
// test_verify's (the mutants).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "cli_run.hpp"

#include "lowbit/block_inputs.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/generators.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

std::vector<float> inputs_of(const char* format, const std::string& spec, nlohmann::json params = {}) {
  const FormatSpec& f = *find_format(format);
  return generate_inputs(parse_input_spec(spec), f, resolve_params(f, params.is_null() ? nlohmann::json::object() : params));
}

// bitsandbytes' CPU index of y, from its definition: (uint16) fma((clamp(y, -1, 1) + 1) * 0.5, 65535, 0.5),
// the sum and the half in float, the fused multiply-add exact in double (a 25-bit by 16-bit product plus
// 0.5) and rounded once to float, then truncated.
int index_of(float y) {
  if (std::isnan(y)) return 0;
  const float half = (std::fmin(std::fmax(y, -1.0f), 1.0f) + 1.0f) * 0.5f;
  return static_cast<int>(static_cast<float>(static_cast<double>(half) * 65535.0 + 0.5));
}

// The table's code of each cell from its definition: the count of midpoints below the cell's grid value.
std::vector<int> table_of(const std::vector<float>& q) {
  std::vector<int> table(65536);
  for (int t = 0; t < 65536; ++t) {
    const float v = -1.0f + (2.0f * static_cast<float>(t)) / 65535.0f;
    int below = 0;
    for (std::size_t j = 0; j + 1 < q.size(); ++j) below += 0.5f * (q[j] + q[j + 1]) < v;
    table[t] = below;
  }
  return table;
}

}  // namespace

TEST_CASE("table-edges: both sides of every cell boundary where bitsandbytes' CPU table changes its code") {
  for (const char* format : {"bnb.blockwise8.dynamic", "bnb.blockwise8.linear"}) {
    CAPTURE(format);
    const FormatSpec& f = *find_format(format);
    const nlohmann::json params = f.default_params;
    const std::vector<float> x = inputs_of(format, "table-edges");
    const std::vector<float> q = f.auxiliary_inputs(params).front().f32();
    const std::vector<int> table = table_of(q);
    const std::size_t block = 4096;
    REQUIRE(x.size() % block == 0);
    // every block is led by its absmax; the first ones hold the values under an absmax of 1
    std::set<float> leads;
    std::set<int> first_of_cell;  // cells t with an input y of index t whose lower neighbour has index t - 1
    for (std::size_t b = 0; b < x.size() / block; ++b) {
      const float a = x[b * block];
      leads.insert(a);
      for (std::size_t i = b * block; i < (b + 1) * block; ++i) REQUIRE(std::fabs(x[i]) <= a);
      if (a != 1.0f) continue;
      for (std::size_t i = b * block + 1; i < (b + 1) * block; ++i) {
        const int t = index_of(x[i]);
        if (t > 0 && index_of(std::nextafter(x[i], -2.0f)) == t - 1) first_of_cell.insert(t);
      }
    }
    CHECK(leads == std::set<float>{1.0f, 1.7f, 0.31415927f, 0.0037f, 1234.567f, 3.0f});
    int changes = 0;
    for (int t = 1; t < 65536; ++t) {
      if (table[t] == table[t - 1]) continue;
      ++changes;
      CAPTURE(t);
      CHECK(first_of_cell.count(t));      // where the code changes
      CHECK(first_of_cell.count(t - 1));  // and where only the index does, either side
      if (t < 65535) CHECK(first_of_cell.count(t + 1));
    }
    CHECK(changes > 200);
  }
}

TEST_CASE("tiny-blocks: the edges under tiny, subnormal and reciprocal-overflowing absmaxes") {
  for (const char* format : {"bnb.blockwise8.dynamic", "torchao.codebook8.signed", "torchao.fp8", "fp8.perblock.e4m3"}) {
    CAPTURE(format);
    const FormatSpec& f = *find_format(format);
    const std::size_t block = f.default_params.at("block_size").get<std::size_t>();
    const std::vector<float> x = inputs_of(format, "tiny-blocks");
    REQUIRE(x.size() % block == 0);
    std::set<float> absmaxes;
    bool subnormal_element = false;
    for (std::size_t b = 0; b < x.size() / block; ++b) {
      float a = 0;
      for (std::size_t i = b * block; i < (b + 1) * block; ++i) {
        if (std::isnan(x[i])) continue;
        a = std::fmax(a, std::fabs(x[i]));
        subnormal_element |= std::fpclassify(x[i]) == FP_SUBNORMAL;
      }
      absmaxes.insert(a);
    }
    CHECK(subnormal_element);
    for (float a : kTinyAbsmaxes) CHECK(absmaxes.count(a));
    bool below_clip = false, overflows = false, subnormal_finite = false;
    for (float a : absmaxes) {
      below_clip |= a > 0 && a < 1e-12f;  // torchao's clip applies
      overflows |= a > 0 && std::isinf(1.0f / a);  // a subnormal absmax whose reciprocal overflows
      subnormal_finite |= std::fpclassify(a) == FP_SUBNORMAL && std::isfinite(1.0f / a);
    }
    CHECK(below_clip);
    CHECK(overflows);
    CHECK(subnormal_finite);
  }
  CHECK_THROWS_WITH_AS(inputs_of("fp8.e4m3fn.satfinite", "tiny-blocks"),
                       "input spec 'tiny-blocks': tiny-blocks needs a block-wise format (fp8.e4m3fn.satfinite is not one)",
                       std::invalid_argument);
}

TEST_CASE("special-blocks: all NaN, all Inf, all -0.0, mixed zeros, and a last block ending on its largest value") {
  const auto bits = [](float v) { return bits_of(v); };
  SUBCASE("bitsandbytes: a partial tail of half a block") {
    const std::vector<float> x = inputs_of("bnb.blockwise8.dynamic", "special-blocks");
    const std::size_t b = 4096;
    REQUIRE(x.size() == 4 * b + b / 2);
    CHECK(bits(x[0]) == 0xFFC00001u);  // a negative NaN with a payload first
    std::set<std::uint32_t> nan_bits;
    for (std::size_t i = 0; i < b; ++i) {
      REQUIRE(std::isnan(x[i]));
      nan_bits.insert(bits(x[i]));
      REQUIRE(std::isinf(x[b + i]));
      REQUIRE(bits(x[2 * b + i]) == 0x80000000u);
      REQUIRE(x[3 * b + i] == 0.0f);
    }
    CHECK(nan_bits.size() == 4);
    CHECK(bits(x[3 * b]) == 0u);
    CHECK(bits(x[3 * b + 1]) == 0x80000000u);
    CHECK(x[b] == std::numeric_limits<float>::infinity());
    CHECK(x[b + 1] == -std::numeric_limits<float>::infinity());
    for (std::size_t i = 4 * b; i + 1 < x.size(); ++i) REQUIRE(std::fabs(x[i]) < x.back());
  }
  SUBCASE("torchao: whole blocks only; an odd block size twice its last block (4-bit pairs)") {
    const std::vector<float> x = inputs_of("torchao.codebook8.signed", "special-blocks");
    CHECK(x.size() == 5 * 256);
    const std::vector<float> one = inputs_of("torchao.codebook4.signed", "special-blocks", {{"block_size", 1}});
    CHECK(one.size() == 6);
    CHECK(one[4] == 1.7f);
    CHECK(one[5] == 1.7f);
  }
  SUBCASE("COAT's 2-D formats: whole tiles, every row group and column group of one kind, the last ending on its maximum") {
    // coat.act.pergroup.transposed quantizes 1 x 16 groups along the rows and along the columns of
    // 16 x 16 tiles; coat.act.pergroup's tile is 32 x 64 (M % 2QB, N % 4QB)
    for (const auto& [format, rows, cols] : {std::tuple{"coat.act.pergroup.transposed", 16, 16},
                                             std::tuple{"coat.act.pergroup", 32, 64}, std::tuple{"coat.fake.symm", 1, 32}}) {
      CAPTURE(format);
      const std::vector<float> x = inputs_of(format, "special-blocks");
      const auto area = static_cast<std::size_t>(rows * cols);
      REQUIRE(x.size() == 5 * area);
      const auto at = [&](std::size_t tile, int r, int c) { return x[tile * area + static_cast<std::size_t>(r * cols + c)]; };
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
          REQUIRE(std::isnan(at(0, r, c)));
          REQUIRE(std::isinf(at(1, r, c)));
          REQUIRE(bits(at(2, r, c)) == 0x80000000u);
          REQUIRE(at(3, r, c) == 0.0f);
          // each group of 16 along a row and down a column ends on its largest magnitude
          if (c % 16 == 15)
            for (int k = c - 15; k < c; ++k) REQUIRE(std::fabs(at(4, r, k)) < std::fabs(at(4, r, c)));
          if (r % 16 == 15)
            for (int k = r - 15; k < r; ++k) REQUIRE(std::fabs(at(4, k, c)) < std::fabs(at(4, r, c)));
        }
      CHECK(x.back() == 1.7f);
      CHECK(bits(at(3, 0, 0)) == 0u);
      CHECK(bits(at(3, 0, 1)) == 0x80000000u);
    }
  }
}

namespace {

// The stems of the cases the format's default battery makes; a run the format skips fails the test.
std::set<std::string> battery_stems(const FormatSpec& f) {
  std::set<std::string> stems;
  for (const InputRun& run : default_input_runs(f))
    for_each_reference_case(
        f, run, 1, {"lowbit test", "test_battery"}, true,
        [&](const std::string& stem, const Case&) { stems.insert(stem); },
        [&](const std::string& stem, const std::string& why) { FAIL_CHECK(stem << " skipped: " << why); });
  return stems;
}

}  // namespace

TEST_CASE("the default battery of every 1-D block-wise format runs its new inputs and block sizes, none skipped") {
  for (const char* format : {"torchao.codebook8.signed", "torchao.codebook8.unsigned", "torchao.codebook4.signed",
                             "torchao.codebook4.unsigned", "torchao.fp8", "fp8.perblock.e4m3", "bnb.blockwise8.dynamic",
                             "bnb.blockwise8.linear"}) {
    CAPTURE(format);
    const FormatSpec& f = *find_format(format);
    const std::set<std::string> stems = battery_stems(f);
    CHECK(stems.count("tiny-blocks"));
    CHECK(stems.count("special-blocks"));
    CHECK(stems.count("table-edges") == (std::string(format).starts_with("bnb.") ? 1u : 0u));
    for (std::size_t block : f.battery_block_sizes) {
      // the random input: 4096 values, or whole blocks of an even count (4158 at 33) where torchao wants them
      const std::size_t unit = block % 2 ? 2 * block : block, n = f.whole_blocks ? (4096 + unit - 1) / unit * unit : 4096;
      for (const std::string& spec : {std::string("edges"), std::string("special-blocks"), "normal.n" + std::to_string(n) + ".seed5"})
        CHECK(stems.count(spec + ".block_size-" + std::to_string(block)));
    }
    CHECK(f.battery_block_sizes.size() == 3);
    // a block size that is no power of two (an element's block found by a shift is wrong there), odd
    CHECK(std::count(f.battery_block_sizes.begin(), f.battery_block_sizes.end(), 33u) == 1);
    // bitsandbytes: the random input above the sizes where a kernel's own threads start (2^20 + 1000:
    // a partial tail at 4096)
    CHECK(stems.count("normal.n1049576.seed7") == (std::string(format).starts_with("bnb.") ? 1u : 0u));
  }
  // the 4-bit states' codes are packed in pairs over the whole state: at 33, every input an even count
  for (const char* format : {"torchao.codebook4.signed", "torchao.codebook4.unsigned"})
    for (const char* spec : {"edges", "special-blocks", "normal:n=4158,seed=5"}) {
      CAPTURE(format);
      CAPTURE(spec);
      const std::size_t n = inputs_of(format, spec, {{"block_size", 33}}).size();
      CHECK(n % 66 == 0);
    }
  // bitsandbytes' CUDA back end takes 64 to 4096 only: its run at 33 is skipped with the reason
  const FormatSpec& bnb = *find_format("bnb.blockwise8.dynamic");
  std::string why;
  for_each_reference_case(
      bnb, {"special-blocks", resolve_params(bnb, {{"block_size", 33}, {"backend", "cuda-ieee"}})}, 1,
      {"lowbit test", "test_battery"}, true, [](const std::string&, const Case&) { FAIL("made a case at 33 for cuda-ieee"); },
      [&](const std::string&, const std::string& reason) { why = reason; });
  CHECK(why.find("backend cuda-ieee takes block sizes 64, 128, 256, 512, 1024, 2048 and 4096 only") != std::string::npos);
}

TEST_CASE("gradient-blocks: a zero, a tiny, a NaN, a +Inf and a -Inf block moving with the seed over normal values") {
  // block size, n (whole blocks; a partial last block of 37) by format
  for (const auto& [format, n] : {std::pair{"bnb.adam8bit.cpu", 4133}, {"torchao.adam.codebook8", 4096},
                                  {"torchao.adam.codebook4", 4096}}) {
    CAPTURE(format);
    const FormatSpec& f = *find_format(format);
    const std::size_t block = f.default_params.at("block_size").get<std::size_t>(), blocks = (n + block - 1) / block;
    std::set<std::size_t> seen;  // the special blocks of seeds 7 to 9: verify's three steps' gradients
    for (std::uint64_t seed = 6; seed <= 9; ++seed) {
      CAPTURE(seed);
      const std::string tail = ":n=" + std::to_string(n) + ",seed=" + std::to_string(seed) + ",std=0.5";
      const std::vector<float> x = inputs_of(format, "gradient-blocks" + tail), normal = inputs_of(format, "normal" + tail);
      REQUIRE(x.size() == static_cast<std::size_t>(n));
      std::size_t zero = 0, tiny = 0, nan = 0, pos_inf = 0, neg_inf = 0, kept = 0;
      for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t start = b * block, end = std::min<std::size_t>(n, start + block);
        std::size_t zeros = 0, scaled = 0, same = 0, nans = 0, pos = 0, neg = 0;
        for (std::size_t i = start; i < end; ++i) {
          zeros += bits_of(x[i]) == 0u;
          scaled += bits_of(x[i]) == bits_of(normal[i] * 1e-20f) && std::fabs(x[i]) < 1e-18f;
          same += bits_of(x[i]) == bits_of(normal[i]);
          nans += std::isnan(x[i]);
          pos += x[i] == std::numeric_limits<float>::infinity();
          neg += x[i] == -std::numeric_limits<float>::infinity();
        }
        const std::size_t len = end - start;
        if (zeros == len) ++zero;
        else if (scaled == len) ++tiny;
        else if (same == len) ++kept;
        else {
          CHECK(same == len - 1);  // one special value in a block of the normal draws
          nan += nans == 1;
          pos_inf += pos == 1;
          neg_inf += neg == 1;
        }
        if (same != len && seed >= 7) CHECK(seen.insert(b).second);  // no block special at two steps
      }
      CHECK(zero == 1);
      CHECK(tiny == 1);
      CHECK(nan == 1);
      CHECK(pos_inf == 1);
      CHECK(neg_inf == 1);
      CHECK(kept == blocks - 5);
    }
  }
  // the blocks' squares: a tiny block's are subnormal or zero (1e-20 x values of std 0.5)
  const std::vector<float> x = inputs_of("bnb.adam8bit.cpu", "gradient-blocks:n=4133,seed=6,std=0.5");
  const std::size_t tiny_block = 30 % 17 + 1;  // block 5 seed + 1 modulo 17
  for (std::size_t i = tiny_block * 256; i < tiny_block * 256 + 256; ++i) CHECK(std::fabs(x[i] * x[i]) < std::numeric_limits<float>::min());
  CHECK_THROWS_WITH_AS(inputs_of("bnb.adam8bit.cpu", "gradient-blocks:n=1024"),
                       "input spec 'gradient-blocks:n=1024': gradient-blocks needs at least 5 blocks of 256 (n >= 1025)",
                       std::invalid_argument);
}

TEST_CASE("the optimizers' battery steps gradient-blocks from a normal parameter: whole blocks for torchao, a tail for bitsandbytes") {
  for (const char* format : {"torchao.adam.codebook8", "torchao.adam.codebook4", "torchao.adam.fp8", "bnb.adam8bit.cpu",
                             "bnb.lion8bit.cpu", "bnb.momentum8bit.cpu", "bnb.rmsprop8bit.cpu", "bnb.adagrad8bit.cpu",
                             "bnb.ademamix8bit.cpu"}) {
    CAPTURE(format);
    const FormatSpec& f = *find_format(format);
    const std::string n = std::string(format).starts_with("bnb.") ? "4133" : "4096";
    const std::vector<InputRun> runs = default_input_runs(f);
    const auto run = std::find_if(runs.begin(), runs.end(), [](const InputRun& r) { return r.spec.starts_with("gradient-blocks"); });
    REQUIRE(run != runs.end());
    CHECK(run->spec == "gradient-blocks:n=" + n + ",seed=6,std=0.5");
    int steps = 0;
    for_each_reference_case(
        f, *run, 3, {"lowbit test", "test_battery"}, true,
        [&](const std::string&, const Case& c) {
          if (++steps == 1) {
            const std::vector<float> normal = generate_inputs(parse_input_spec("normal:n=" + n + ",seed=6,std=0.5"), f, f.default_params);
            const std::vector<float> param = c.require("param").f32();
            CHECK(std::equal(param.begin(), param.end(), normal.begin(), normal.end(),
                             [](float a, float b) { return bits_of(a) == bits_of(b); }));
          }
        },
        [&](const std::string& stem, const std::string& why) { FAIL_CHECK(stem << " skipped: " << why); });
    CHECK(steps == 3);
  }
  for (const char* format : {"torchao.adam.dense", "coat.optim.origin.e4m3", "bnb.lion8bit.cuda"})
    for (const InputRun& r : default_input_runs(*find_format(format))) CHECK(!r.spec.starts_with("gradient-blocks"));
}

TEST_CASE("coat.fake.symm's edges: blocks led by 1.75 of scale 2^-8, x / scale on every midpoint of the E4M3 grid") {
  const FormatSpec& f = *find_format("coat.fake.symm");
  const std::vector<float> x = inputs_of("coat.fake.symm", "edges");
  REQUIRE(x.size() % 16 == 0);
  // the E4M3 grid from its definition: subnormals m/8 2^-6, normals (1 + m/8) 2^(e - 7) up to 448
  std::vector<double> grid;
  for (int m = 0; m < 8; ++m) grid.push_back(m / 8.0 * std::ldexp(1.0, -6));
  for (int e = 1; e < 16; ++e)
    for (int m = 0; m < 8 && !(e == 15 && m == 7); ++m) grid.push_back((1 + m / 8.0) * std::ldexp(1.0, e - 7));
  std::set<double> scaled;  // x / 2^-8 of every element, exact in double
  for (std::size_t b = 0; b < x.size() / 16; ++b) {
    REQUIRE(x[b * 16] == 1.75f);
    for (std::size_t i = b * 16; i < (b + 1) * 16; ++i) {
      REQUIRE(std::fabs(x[i]) <= 1.75f);
      scaled.insert(std::ldexp(static_cast<double>(x[i]), 8));
    }
  }
  for (std::size_t j = 0; j + 1 < grid.size(); ++j) {
    CAPTURE(grid[j]);
    CHECK(scaled.count((grid[j] + grid[j + 1]) / 2));   // the tie
    CHECK(scaled.count(-(grid[j] + grid[j + 1]) / 2));  // and its negative
  }
  // the reference's block scales are the power of two (2 (1.75 + 1e-8) / 896 = 2^-8 in float32)
  Case in;
  in.add(Tensor::from_f32("input", {static_cast<std::int64_t>(x.size() / 16), 16}, x));
  for (const Tensor& t : f.run(in, f.default_params, 1))
    if (t.name == "scale")
      for (float s : t.f32()) REQUIRE(s == 0x1p-8f);
  // 4 x 8 blocks (the battery's other shape), two side by side in each 4 x 16 tile: every block led by
  // 1.75 at its own (0, 0), so that its scale is 2^-8 too
  nlohmann::json blocks = f.default_params;
  blocks["row_block"] = 4;
  blocks["col_block"] = 8;
  const std::vector<float> y = inputs_of("coat.fake.symm", "edges", blocks);
  REQUIRE(y.size() % 64 == 0);
  for (std::size_t r = 0; r < y.size() / 16; r += 4)
    for (std::size_t c : {0, 8}) CHECK(y[r * 16 + c] == 1.75f);
  Case four_by_eight;
  four_by_eight.add(Tensor::from_f32("input", {static_cast<std::int64_t>(y.size() / 16), 16}, y));
  for (const Tensor& t : f.run(four_by_eight, blocks, 1))
    if (t.name == "scale")
      for (float s : t.f32()) REQUIRE(s == 0x1p-8f);
}

TEST_CASE("nan-tiles: groups and tiles led by a NaN that hold numbers, groups of NaNs alone after a first group of numbers") {
  // per tensor (32 x 64 tiles, 1 x 16 groups): the tensor's first group is a number's scale, a later one all NaN
  const std::vector<float> t = inputs_of("coat.act.pertensor.groupscale", "nan-tiles");
  REQUIRE(t.size() == 3u * 32 * 64);
  const auto group = [&t](std::size_t g) { return std::span<const float>(t).subspan(16 * g, 16); };
  const auto numbers = [](std::span<const float> v) { return std::count_if(v.begin(), v.end(), [](float x) { return !std::isnan(x); }); };
  CHECK(std::isnan(group(0)[0]));
  CHECK(numbers(group(0)) == 15);
  std::size_t all_nan_after_first = 0, nan_led_with_numbers = 0, nan_last_led_by_number = 0;
  for (std::size_t g = 1; g < t.size() / 16; ++g) {
    all_nan_after_first += numbers(group(g)) == 0;
    nan_led_with_numbers += std::isnan(group(g)[0]) && numbers(group(g)) > 0;
    nan_last_led_by_number += !std::isnan(group(g)[0]) && std::isnan(group(g)[15]);
  }
  CHECK(all_nan_after_first >= 4);
  CHECK(nan_led_with_numbers >= 4);
  CHECK(nan_last_led_by_number >= 4);
  // per block (128 x 128 tiles, one tile each): every tile holds numbers; the first is led by a NaN,
  // the last holds NaNs but not in its first element
  const std::vector<float> b = inputs_of("coat.act.perblock", "nan-tiles");
  REQUIRE(b.size() == 3u * 128 * 128);
  for (std::size_t k = 0; k < 3; ++k) CHECK(numbers(std::span<const float>(b).subspan(k * 128 * 128, 128 * 128)) > 0);
  CHECK(std::isnan(b[0]));
  CHECK(!std::isnan(b[2 * 128 * 128]));
  CHECK(std::isnan(b[2 * 128 * 128 + 127]));
  // not a group quantizer: refused with the input spec named
  CHECK_THROWS_WITH_AS(inputs_of("coat.fake.symm", "nan-tiles"),
                       "input spec 'nan-tiles': nan-tiles needs a 2-D group quantizer (COAT's coat.act.*) (coat.fake.symm is not one)",
                       std::invalid_argument);
}

TEST_CASE("the default battery of COAT's 2-D formats runs special-blocks and the other group sizes, none skipped") {
  for (const char* format : {"coat.act.pergroup", "coat.act.pertensor.groupscale", "coat.act.pergroup.transposed",
                             "coat.act.perblock", "coat.fake.symm"}) {
    CAPTURE(format);
    const FormatSpec& f = *find_format(format);
    const std::set<std::string> stems = battery_stems(f);
    CHECK(stems.count("special-blocks"));
    CHECK(stems.count("nan-tiles") == (std::string(format).starts_with("coat.act.") ? 1u : 0u));
    for (std::size_t qb : f.battery_block_sizes) {
      CHECK(stems.count("edges.group_size-" + std::to_string(qb)));
      CHECK(stems.count("special-blocks.group_size-" + std::to_string(qb)));
    }
  }
  // COAT builds its quantize kernels for QB 16, 32, 64 and 128 (per tensor 16 only): the battery runs
  // the smallest and the largest besides the default
  CHECK(find_format("coat.act.pergroup")->battery_block_sizes == std::vector<std::size_t>{128});
  CHECK(find_format("coat.act.pergroup.transposed")->battery_block_sizes == std::vector<std::size_t>{128});
  CHECK(find_format("coat.act.perblock")->battery_block_sizes == std::vector<std::size_t>{16});
}

// ---- the mutants of the new inputs, through lowbit verify ------------------------------------------

namespace {

std::string plugin(const std::string& name) { return std::string(LOWBIT_PLUGIN_DIR) + "/" + name + ".so"; }

// The default battery before issue 28 (1-D block-wise formats): what each mutant below passed.
std::string old_battery(int block) {
  return "--input edges --input scaled-edges --input special --input special:n=" + std::to_string(block) +
         " --input normal:n=4096,seed=1 --input outliers:n=4096,seed=2 --input lognormal:n=4096,seed=3";
}

// The default battery of a COAT group format before special-blocks and its other group sizes: its
// fixed lists as whole tiles, the special values cycled over `cycled` values and random inputs of `n`.
std::string old_coat_battery(int cycled, int n) {
  const std::string count = std::to_string(n);
  return "--input edges --input scaled-edges --input special --input special:n=" + std::to_string(cycled) +
         " --input normal:n=" + count + ",seed=1 --input outliers:n=" + count + ",seed=2 --input lognormal:n=" + count +
         ",seed=3 --input tiny-blocks";
}

}  // namespace

TEST_CASE("each mutant of a new input class or parameter value passes the old battery and only the new inputs catch it") {
  struct Mutant {
    const char* library;
    int block;                             // its format's default block size (the old battery's special:n)
    std::set<std::string> caught_by;       // every case of the default battery (--no-golden) that catches it
    std::string old = old_battery(block);  // the battery before the inputs that catch it
  };
  const std::string unsigned_map = ".map-dynamic_unsigned", linear_unsigned = ".map-linear_unsigned";
  // the element-wise FP8 casts' battery before the 16-bit inputs
  const std::string old_cast_battery =
      "--input edges --input special --input normal:n=4096,seed=1 --input outliers:n=4096,seed=2 --input lognormal:n=4096,seed=3";
  std::vector<Mutant> mutants = {
      // the lookup table's cells: division against the reciprocal (subnormal absmaxes too: 1 / a overflows)
      {"mutant_bnb_division", 4096, {"table-edges", "tiny-blocks", "table-edges" + unsigned_map, "tiny-blocks" + unsigned_map}},
      // tiny and subnormal absmaxes
      {"mutant_bnb_zero_subnormal_absmax", 4096, {"tiny-blocks", "tiny-blocks" + unsigned_map}},
      {"mutant_bnb_flush_subnormal_dequant", 4096, {"tiny-blocks", "tiny-blocks" + unsigned_map}},
      {"mutant_bnb_flush_subnormal_inputs", 4096, {"tiny-blocks", "tiny-blocks" + unsigned_map}},
      // blocks of one special value, a tail ending on its largest value
      {"mutant_bnb_all_nan_absmax", 4096,
       {"special-blocks", "special-blocks.block_size-33", "special-blocks.block_size-64", "special-blocks.block_size-256",
        "special-blocks" + unsigned_map}},
      {"mutant_bnb_tail_absmax_short", 4096,
       {"special-blocks", "special-blocks.block_size-33", "normal.n4096.seed5.block_size-33", "special-blocks.block_size-64",
        "special-blocks.block_size-256", "special-blocks" + unsigned_map}},
      {"mutant_torchao_fp8_nan_scale_copied", 256,
       {"special-blocks", "special-blocks.block_size-1", "special-blocks.block_size-33", "special-blocks.block_size-4096"}},
      {"mutant_perblock_zero_block_sign", 128,
       {"tiny-blocks", "special-blocks", "edges.block_size-1", "special-blocks.block_size-1", "special-blocks.block_size-33",
        "special-blocks.block_size-4096"}},
      {"mutant_torchao_no_clip", 256,
       {"tiny-blocks", "special-blocks", "edges.block_size-1", "special-blocks.block_size-1", "special-blocks.block_size-33",
        "special-blocks.block_size-4096"}},
      // the other block sizes
      {"mutant_bnb_fixed_block", 4096,
       {"special-blocks.block_size-33", "normal.n4096.seed5.block_size-33", "special-blocks.block_size-64",
        "normal.n4096.seed5.block_size-64", "special-blocks.block_size-256", "normal.n4096.seed5.block_size-256"}},
      // an optimizer step's gradient-blocks: a parameter an earlier step's NaN or Inf gradient reached,
      // under weight decay 0 (the old battery: the default-param runs; its weight_decay 0.01 run adds wd p)
      {"mutant_momentum_l2_skipped", 256,
       {"gradient-blocks.n4133.seed6.std0.5.step2", "gradient-blocks.n4133.seed6.std0.5.step3"},
       "--input normal:n=4096,seed=1,std=0.5 --input adam-v:n=4096,seed=2"},
      // gradient-blocks' zero block under a fresh state: Lion's interpolation exactly 0
      {"mutant_lion_sign_zero_positive", 256, {"gradient-blocks.n4133.seed6.std0.5.step1"},
       "--input normal:n=4096,seed=1,std=0.5 --input adam-v:n=4096,seed=2"},
      // bitsandbytes' partial tail in an optimizer step (gradient-blocks' 4133 elements)
      {"mutant_bnb_optimizer_tail_not_stepped", 256,
       {"gradient-blocks.n4133.seed6.std0.5.step1", "gradient-blocks.n4133.seed6.std0.5.step2",
        "gradient-blocks.n4133.seed6.std0.5.step3"},
       "--input normal:n=4096,seed=1,std=0.5 --input adam-v:n=4096,seed=2"},
      // AdEMAMix's schedulers with periods of their own (t_alpha 2, t_beta3 4; the old run had both 2)
      {"mutant_ademamix_beta3_over_t_alpha", 256,
       {"normal.n4096.seed4.std0.5.t_alpha-2.t_beta3-4.step1", "normal.n4096.seed4.std0.5.t_alpha-2.t_beta3-4.step2",
        "normal.n4096.seed4.std0.5.t_alpha-2.t_beta3-4.step3"},
       "--input normal:n=4096,seed=4,std=0.5 --param t_alpha=2 --param t_beta3=2"},
      // the unsigned dynamic map (bitsandbytes' optimizers' second moments)
      {"mutant_bnb_dequant_nan_positive", 4096, {"special" + unsigned_map, "special-blocks" + unsigned_map}},
      {"mutant_bnb_grid_double", 4096,
       {"edges" + unsigned_map, "table-edges" + unsigned_map, "tiny-blocks" + unsigned_map}},
      // a block size that is no power of two
      {"mutant_torchao_block_shift", 256,
       {"special-blocks.block_size-33", "normal.n4158.seed5.block_size-33"}},  // edges: every block's absmax is 1
      // a random input above the size where a kernel's own threads start
      {"mutant_bnb_thread_split", 4096, {"normal.n1049576.seed7"}},
      // the unsigned linear map (q[0] = 0, where the signed one's is -1)
      {"mutant_bnb_table_code0_minus_one", 4096,
       {"edges" + linear_unsigned, "table-edges" + linear_unsigned, "tiny-blocks" + linear_unsigned,
        "special" + linear_unsigned, "special-blocks" + linear_unsigned}},
      // COAT's group quantizers: groups of one special value as whole tiles, a tile ending on its
      // maximum, the other group sizes COAT builds (16 and 128)
      {"mutant_coat_act_all_nan_scale", 16,
       {"special-blocks", "nan-tiles", "special-blocks.group_size-128", "special-blocks.fp8-e5m2",
        "special-blocks.bf16"}, old_coat_battery(2048, 8192)},
      {"mutant_coat_act_zero_group_codes_zero", 16,
       {"special-blocks", "special-blocks.group_size-128", "special-blocks.fp8-e5m2", "special-blocks.bf16"},
       old_coat_battery(2048, 8192)},
      {"mutant_coat_perblock_absmax_short", 128,
       {"special-blocks", "nan-tiles", "special-blocks.group_size-16", "special-blocks.fp8-e5m2",
        "special-blocks.bf16"},
       old_coat_battery(16384, 65536)},
      {"mutant_coat_act_group16_absmax", 16, {"special-blocks.group_size-128", "normal.n131072.seed5.group_size-128"},
       old_coat_battery(2048, 8192)},
      {"mutant_coat_transposed_group16_absmax", 16,
       {"special-blocks.group_size-128", "normal.n16384.seed5.group_size-128"},
       "--input edges --input scaled-edges --input special --input special:n=512 --input normal:n=4096,seed=1 "
       "--input outliers:n=4096,seed=2 --input lognormal:n=4096,seed=3 --input tiny-blocks --input special-blocks"},
      // E5M2 under the GPU's casts (battery_params): a cast through f16 rounds twice
      {"mutant_coat_act_e5m2_double_round", 16, {"edges.fp8-e5m2"}, old_coat_battery(2048, 8192) + " --input special-blocks"},
      // nan-tiles: groups of NaNs alone after a first group of numbers, tiles led by a NaN holding numbers
      {"mutant_coat_pertensor_max_first_group", 16, {"nan-tiles"}, old_coat_battery(2048, 8192) + " --input special-blocks"},
      {"mutant_coat_perblock_absmax_led_by_nan", 128, {"nan-tiles"}, old_coat_battery(16384, 65536) + " --input special-blocks"},
      // coat.fake.symm's edges: x / scale on the grid's ties behind a power-of-two block scale
      {"mutant_coat_symm_ties_even", 16, {"edges", "edges.col_block-8.row_block-4"},
       "--input special --input special:n=288 --input normal:n=4096,seed=1 --input outliers:n=4096,seed=2 "
       "--input lognormal:n=4096,seed=3 --input special-blocks"},
      // the 16-bit inputs: every bf16 and f16 value (as float32 too: the round bit with the bit below it
      // alone), f16 NaN payloads in an F16 tensor, a bf16 input's bf16 dequant
      {"mutant_fp8_sticky_short", 0, {"all-bf16", "all-bf16.bf16", "all-f16", "all-f16.f16"}, old_cast_battery},
      {"mutant_fp8_f16_nan_inf", 0, {"all-f16.f16"}, old_cast_battery},
      {"mutant_bnb_bf16_dequant_truncated", 4096, {"normal.bf16.n4096.seed1", "special-blocks.bf16"}},
  };
  // coat.fake.symm's blocks more than one row high (battery_params 4 x 8), its inputs two blocks across
  mutants.push_back({"mutant_coat_symm_flat_blocks", 16,
                     {"edges.col_block-8.row_block-4", "special.col_block-8.row_block-4", "special-blocks.col_block-8.row_block-4"},
                     "--input edges --input special --input special:n=288 --input normal:n=4096,seed=1 "
                     "--input outliers:n=4096,seed=2 --input lognormal:n=4096,seed=3 --input special-blocks"});
  for (const Mutant& m : mutants) {
    CAPTURE(m.library);
    const Run before = lowbit_cli("verify --kernel " + plugin(m.library) + " --no-golden " + m.old);
    CAPTURE(before.output);
    CHECK(before.code == 0);
    const Run now = lowbit_cli("verify --kernel " + plugin(m.library) + " --no-golden");
    CAPTURE(now.output);
    CHECK(now.code == 1);
    CHECK(failing_cases(now.output) == m.caught_by);
  }
}

TEST_CASE("every mutant of the bank is caught by the default battery without golden cases") {
  std::size_t mutants = 0;
  std::istringstream names(LOWBIT_MUTANT_NAMES);  // the bank as conformance/CMakeLists.txt builds it
  for (std::string name; names >> name;) {
    ++mutants;
    CAPTURE(name);
    const Run r = lowbit_cli("verify --kernel " + plugin("mutant_" + name) + " --no-golden");
    CHECK(r.code == 1);
  }
  CHECK(mutants == 65);
}

TEST_CASE("verify --param: every generated case takes it; a bad key or value is one line, exit 2") {
  const std::string kernel = "--kernel " + plugin("reference_plugin") + ":reference.bnb.blockwise8.dynamic --no-golden";
  const Run ok = lowbit_cli("verify " + kernel + " --param map=dynamic_unsigned --param block_size=256");
  CAPTURE(ok.output);
  CHECK(ok.code == 0);
  // the battery's own block sizes and maps give way to the given ones: each run once
  CHECK(ok.output.find("ok       edges.block_size-256.map-dynamic_unsigned:") != std::string::npos);
  CHECK(ok.output.find("block_size-64") == std::string::npos);
  CHECK(ok.output.find("16 of 16 cases conformant") != std::string::npos);  // 12, and the bf16 and f16 inputs
  // caught only with the unsigned map: given it, the old inputs catch it too
  const Run caught = lowbit_cli("verify --kernel " + plugin("mutant_bnb_dequant_nan_positive") +
                                " --no-golden --input special --param map=dynamic_unsigned");
  CHECK(caught.code == 1);
  CHECK(caught.output.find("MISMATCH special.map-dynamic_unsigned:") != std::string::npos);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"nope=1", "lowbit: error: --param nope=1: bnb.blockwise8.dynamic has no parameter 'nope' (its parameters: backend, "
                 "block_size, cpu_capability, map)\n"},
      {"block_size=abc", "lowbit: error: --param block_size=abc: block_size takes a number (its default is 4096)\n"},
      {"map=bogus", "lowbit: error: --param map=bogus: bnb map must be dynamic_signed, dynamic_unsigned, dynamic_signed4, "
                    "linear_signed or linear_unsigned (got 'bogus')\n"},
      {"map", "lowbit: error: --param 'map' is not KEY=VALUE\n"},
  };
  for (const auto& [item, line] : bad) {
    const Run r = lowbit_cli("verify " + kernel + " --param " + item);
    CHECK(r.code == 2);
    CHECK(r.output == line);
  }
  const Run zero = lowbit_cli("verify " + kernel + " --param block_size=0");
  CHECK(zero.code == 2);
  CHECK(zero.output.starts_with("lowbit: error: --param block_size=0: "));
  CHECK(zero.output.find("block_size must be a whole number from 1 to 2147483647 (got 0)") != std::string::npos);
}

TEST_CASE("verify --param group_size: the battery's inputs are whole tiles of the group size given") {
  // the battery sizes its inputs (special cycled, the random inputs) from the params it runs with, so
  // every group size COAT builds its kernels for runs the whole battery (before: special:n=2048, made
  // for QB 16, was exit 2 at QB 32, 64 and 128)
  for (const char* format : {"coat.act.pergroup", "coat.act.pergroup.transposed", "coat.act.perblock"})
    for (int qb : {16, 32, 64, 128}) {
      CAPTURE(format);
      CAPTURE(qb);
      const Run r = lowbit_cli("verify --kernel " + plugin("reference_plugin") + ":reference." + format +
                               " --no-golden --param group_size=" + std::to_string(qb));
      CAPTURE(r.output);
      CHECK(r.code == 0);
      CHECK(r.output.find("skipped") == std::string::npos);
    }
}
