// Speed of verify and of the mismatch classes (issue 10, item 8), in one process and one run:
// (1) for each block-wise format named, a 2^k-element input: the reference's own time (run_reference)
//     against verify_case with the reference as the kernel under review (the plugin in a child
//     process, its tensors in and out, and the comparison), best of R;
// (2) classifying a million mismatches: 2^20 codebook codes each moved by one code, and 2^20 new
//     torchao Adam parameters each moved by one ulp, through compare_cases (every mismatch explained).
// Prints one JSON object; docs/benchmarks.md reports it. Not a test: it is built on request only
// (cmake --build build/release --target bench_verify).
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lowbit/case_maker.hpp"
#include "lowbit/compare.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/verify.hpp"

using namespace lowbit;

namespace {

double seconds(const std::function<void()>& work) {
  const auto t0 = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double best_seconds(int repeats, const std::function<void()>& work) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) best = std::min(best, seconds(work));
  return best;
}

// The case an input spec makes for the format (its first case, or step `which` + 1), as verify makes it.
Case made_case(const FormatSpec& f, const std::string& spec, int steps, int which) {
  Case out;
  int seen = 0;
  for_each_case(f, f.default_params, parse_input_spec(spec), steps, {"lowbit bench", "bench_verify"}, [&](CaseToRun c) {
    Case done = run_reference(f, c.inputs);
    if (seen++ == which) out = done;
    return done;
  });
  return out;
}

nlohmann::json classes(const ComparisonReport& r, const std::string& tensor) {
  nlohmann::json j = nlohmann::json::object();
  for (const TensorComparison& t : r.tensors)
    if (t.name == tensor) {
      j["mismatches"] = t.mismatches;
      for (MismatchClass c : kMismatchClasses)
        if (t.by_class[static_cast<std::size_t>(c)]) j[std::string(mismatch_class_name(c))] = t.by_class[static_cast<std::size_t>(c)];
    }
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: bench_verify REFERENCE_PLUGIN.so LOG2_ELEMENTS REPEATS FORMAT...\n";
    return 2;
  }
  const std::string plugin = argv[1];
  const int log2n = std::stoi(argv[2]), repeats = std::stoi(argv[3]);
  nlohmann::json out;
  out["elements"] = 1ull << log2n;
  for (int a = 4; a < argc; ++a) {
    const FormatSpec* f = find_format(argv[a]);
    if (!f) {
      std::cerr << "bench_verify: no format " << argv[a] << "\n";
      return 2;
    }
    const Case expected = made_case(*f, "normal:n=" + std::to_string(1ull << log2n) + ",seed=1", 1, 0);
    const TolerancePolicy policy;
    const KernelUnderReview k{plugin, "reference." + f->name, 600, {}, 0, {}};
    Case check;
    const double reference = best_seconds(repeats, [&] { check = run_reference(*f, expected); });
    VerifiedCase v;
    const double verify = best_seconds(repeats, [&] { v = verify_case(k, *f, expected, policy, "bench"); });
    ComparisonReport r;
    const double compare = best_seconds(repeats, [&] { r = compare_cases(expected, check, policy); });
    // the kernel under review is the reference itself: what verify adds is its time beyond one more run
    // of the reference (the kernel's own work): the child process, the tensors in and out, the comparison
    out["verify"][f->name] = {{"reference_s", reference},
                              {"verify_case_s", verify},
                              {"compare_s", compare},
                              {"added_over_reference", (verify - reference) / reference},
                              {"conformant", v.conformant()},
                              {"failure", v.failure}};
  }

  // a million mismatches, every one explained
  const std::size_t million = 1u << 20;
  {
    const FormatSpec& f = *find_format("torchao.codebook8.signed");
    const Case expected = made_case(f, "normal:n=" + std::to_string(million) + ",seed=1", 1, 0);
    Case actual = expected;
    std::vector<std::uint8_t> codes = actual.require("codes").u8();
    for (auto& c : codes) c = c == 255 ? 254 : c + 1;  // the neighbouring code: tie, near-boundary or genuine
    actual.add(Tensor::from_bytes("codes", DType::U8, actual.require("codes").shape, codes));
    ComparisonReport r;
    const double s = best_seconds(repeats, [&] { r = compare_cases(expected, actual, TolerancePolicy{}); });
    out["classify"]["torchao.codebook8.signed codes"] = {{"seconds", s}, {"classes", classes(r, "codes")}};
  }
  {
    const FormatSpec& f = *find_format("torchao.adam.codebook8");
    const Case expected = made_case(f, "normal:n=" + std::to_string(million) + ",seed=1,std=0.5", 2, 1);  // step 2
    Case actual = expected;
    std::vector<float> p = actual.require("param.next").f32();
    for (float& x : p) x = std::nextafter(x, INFINITY);  // +1 ulp: no arithmetic variant, no library rounding
    actual.add(Tensor::from_f32("param.next", actual.require("param.next").shape, p));
    ComparisonReport r;
    const TolerancePolicy policy = load_tolerance_policy("torch-cpu-eager", LOWBIT_POLICY_DIR);
    const double s = best_seconds(repeats, [&] { r = compare_cases(expected, actual, policy); });
    out["classify"]["torchao.adam.codebook8 param.next +1 ulp"] = {{"seconds", s}, {"classes", classes(r, "param.next")}};
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}
