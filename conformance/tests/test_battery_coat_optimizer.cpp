// The default battery of COAT's FP8 AdamW launches (coat.optim.origin.e4m3, coat.optim.expand.e4m3):
// its `edges` run, the gradients random ones never are (exact zeros where the expansion's minimum tree
// skips them, groups of one magnitude, moments above the 1e9 cap, a ratio at a step of k, a partial last
// group). Each group is checked here against what it claims from the kernels' definitions
// (docs/formats/coat-optimizer.md), in double where it says so, not with the reference; and each mutant
// of one of these bugs passes the battery before them and fails only their cases.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "cli_run.hpp"

#include "lowbit/case_maker.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/generators.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

std::vector<float> edges_of(const char* format) {
  const FormatSpec& f = *find_format(format);
  return generate_inputs(parse_input_spec("edges"), f, f.default_params);
}

// The lanes of a group whose |x| is the smallest nonzero one, and those holding exact zeros.
struct Lanes {
  std::set<std::size_t> smallest, zeros;
};
Lanes lanes_of(const std::vector<float>& x, std::size_t group) {
  Lanes l;
  double min = INFINITY;
  for (std::size_t lane = 0; lane < 128; ++lane) {
    const double a = std::fabs(static_cast<double>(x[group * 128 + lane]));
    if (a == 0) l.zeros.insert(lane);
    else if (a < min) min = a, l.smallest = {lane};
    else if (a == min) l.smallest.insert(lane);
  }
  return l;
}

// Whether the kernel's warp tree never brings lane j's value to lane 0 past a zero at lane z >= 1
// (coat-optimizer.md "Zeros hide subtrees": j = z modulo 2^(h + 1), h the index of z's highest bit).
bool hidden_by(std::size_t j, std::size_t z) {
  std::size_t h = 0;
  while ((z >> (h + 1)) != 0) ++h;
  return j % 32 % (std::size_t{2} << h) == z % 32;
}

std::string plugin(const std::string& name) { return std::string(LOWBIT_PLUGIN_DIR) + "/" + name + ".so"; }

}  // namespace

TEST_CASE("COAT's optimizer edges: zeros that hide the minimum, one magnitude, the 1e9 cap, a step of k, a partial group") {
  const std::vector<float> x = edges_of("coat.optim.expand.e4m3");
  CHECK(x == edges_of("coat.optim.origin.e4m3"));
  REQUIRE(x.size() == 9 * 128 + 50);  // a partial last group of 50
  // 0: one zero, at lane 1; the smallest magnitude at lane 3, which lane 1 hides
  const Lanes g0 = lanes_of(x, 0);
  CHECK(g0.zeros == std::set<std::size_t>{1});
  CHECK(g0.smallest == std::set<std::size_t>{3});
  CHECK(hidden_by(3, 1));
  // 1: the smallest magnitude at lane 21, hidden by lane 5's zero; the next smallest at lane 100 of warp 3,
  // whose lane 0 (96) is zero
  const Lanes g1 = lanes_of(x, 1);
  CHECK(g1.zeros == std::set<std::size_t>{5, 13, 29, 32, 96});
  CHECK(g1.smallest == std::set<std::size_t>{21});
  CHECK(hidden_by(21, 5));
  CHECK(std::fabs(x[128 + 100]) < 0.05f);
  // 2-4: one magnitude (R = 1): all zeros; 3.0 everywhere; one value at lane 0 and zeros elsewhere
  for (std::size_t i = 0; i < 128; ++i) {
    CHECK(x[2 * 128 + i] == 0.0f);
    CHECK(x[3 * 128 + i] == 3.0f);
    CHECK(x[4 * 128 + i] == (i == 0 ? 1e-2f : 0.0f));
    CHECK(x[5 * 128 + i] == (i == 5 ? 1e-2f : 0.0f));  // 5: the same value at lane 5: lane 0's zero decides
  }
  // 6: both moments of the first step (m = (1 - beta1) g, v = g ((1 - beta2) g), float32) at least 1e9
  const float w1 = 1.0f - 0.9f, w2 = 1.0f - 0.999f;
  for (std::size_t i = 6 * 128; i < 7 * 128; ++i) {
    CHECK(std::fabs(w1 * x[i]) >= 1e9f);
    CHECK(x[i] * (w2 * x[i]) >= 1e9f);
  }
  // 7, 8: [B, A x 127]: the exact log2(100352) / log2(A / B) * 16 of the first moment's A and B (group
  // 7) and the second moment's (group 8), each + 1e-30 in double as the kernel adds, lies within 1e-6
  // of a whole number, not on it: where log2f's last bits move floor(k * 16)
  const auto first = [&](std::size_t i) { return static_cast<float>(static_cast<double>(w1 * x[i]) + 1e-30); };
  const auto second = [&](std::size_t i) { return static_cast<float>(static_cast<double>(x[i] * (w2 * x[i])) + 1e-30); };
  for (std::size_t group : {7u, 8u}) {
    CAPTURE(group);
    const std::size_t at = group * 128;
    for (std::size_t i = at + 1; i < at + 128; ++i) REQUIRE(x[i] == x[at + 1]);
    const long double a = group == 7 ? first(at + 1) : second(at + 1), b = group == 7 ? first(at) : second(at);
    const long double q = std::log2(100352.0L) / std::log2(a / b) * 16;
    CAPTURE(static_cast<double>(q));
    CHECK(std::fabs(q - std::round(q)) < 1e-6L);
    CHECK(q != std::round(q));
  }
  // the tail: ordinary values, none zero
  for (std::size_t i = 9 * 128; i < x.size(); ++i) CHECK(std::fabs(x[i]) >= 0.05f);
}

TEST_CASE("the default battery of COAT's optimizers runs its edges, none skipped") {
  for (const char* format : {"coat.optim.origin.e4m3", "coat.optim.expand.e4m3"}) {
    CAPTURE(format);
    const FormatSpec& f = *find_format(format);
    std::set<std::string> stems;
    for (const InputRun& run : default_input_runs(f))
      for_each_reference_case(
          f, run, 3, {"lowbit test", "test_battery_coat_optimizer"}, true,
          [&](const std::string& stem, const Case&) { stems.insert(stem); },
          [&](const std::string& stem, const std::string& why) { FAIL_CHECK(stem << " skipped: " << why); });
    CHECK(stems == std::set<std::string>{"normal.n4096.seed1.std0.5.step1", "normal.n4096.seed1.std0.5.step2",
                                         "normal.n4096.seed1.std0.5.step3", "adam-v.n4096.seed2.step1",
                                         "adam-v.n4096.seed2.step2", "adam-v.n4096.seed2.step3", "edges.step1",
                                         "edges.step2", "edges.step3"});
  }
}

TEST_CASE("each COAT optimizer mutant of the edges passes the battery before them and only the edges catch it") {
  // the reference as a kernel: every case of the battery, edges included
  for (const char* format : {"coat.optim.origin.e4m3", "coat.optim.expand.e4m3"}) {
    const Run ok = lowbit_cli("verify --kernel " + plugin("reference_plugin") + ":reference." + format);
    CAPTURE(ok.output);
    CHECK(ok.code == 0);
    CHECK(ok.output.find("9 of 9 cases conformant") != std::string::npos);
  }
  // the default battery of the optimizers before the edges (no golden case of these formats is shipped)
  const std::string old = "--input normal:n=4096,seed=1,std=0.5 --input adam-v:n=4096,seed=2";
  const std::set<std::string> every_step = {"edges.step1", "edges.step2", "edges.step3"};
  struct Mutant {
    const char* library;
    std::set<std::string> caught_by;  // every case of the default battery that catches it
  };
  for (const Mutant& m : {Mutant{"mutant_coat_origin_tail_dropped", every_step},  // the partial group
                          Mutant{"mutant_coat_expand_min_exact", every_step},     // groups 0 and 1
                          Mutant{"mutant_coat_expand_unit_ratio_k_one", every_step},  // groups 2-4
                          Mutant{"mutant_coat_expand_min_fill_flt_max", every_step},  // group 6
                          // groups 7 and 8: the first step only (later steps move A and B)
                          Mutant{"mutant_coat_expand_log_difference", {"edges.step1"}}}) {
    CAPTURE(m.library);
    const Run before = lowbit_cli("verify --kernel " + plugin(m.library) + " " + old);
    CAPTURE(before.output);
    CHECK(before.code == 0);
    const Run now = lowbit_cli("verify --kernel " + plugin(m.library));
    CAPTURE(now.output);
    CHECK(now.code == 1);
    CHECK(failing_cases(now.output) == m.caught_by);
  }
}
