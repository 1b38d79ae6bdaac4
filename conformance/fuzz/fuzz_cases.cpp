// The pipeline fuzzers' inputs as case files.
//   fuzz_cases check-seeds DIR   the committed seeds (conformance/fuzz/seeds_pipeline/): the file
//                                "NN-FORMAT" holds the one byte NN, which fuzz_case_builder.hpp decodes
//                                to FORMAT's consistent case with its default params. Checks that each
//                                one does (the case is of FORMAT, holds every declared input and output,
//                                and conforms to the reference under the format's default policy) and
//                                that every registered format has its seed, so the fuzzers start from
//                                cases that reach the end of the pipeline. Exit 1 on any failure.
//   fuzz_cases write-seeds DIR   (re)writes the seeds, one per registered format
//   fuzz_cases show FILE         the case(s) a fuzz input decodes to: metadata, tensors (for triage)
//   fuzz_cases write FILE PREFIX writes them as PREFIX.expected.safetensors and (as fuzz_compare
//                                decodes the rest) PREFIX.actual.safetensors, to reproduce a finding
//                                with the lowbit command
//   fuzz_cases replay inspect|conform CASE, replay compare EXPECTED ACTUAL
//                                a target's steps on case files, under this build's sanitizers: prints
//                                the outcome (a refusal's message), aborts on an unchecked exception
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_case_builder.hpp"
#include "fuzz_outcome.hpp"
#include "fuzz_policies.hpp"
#include "lowbit/compare.hpp"

namespace {

using namespace lowbit;

std::string seed_name(std::size_t index, const FormatSpec& f) {
  char n[8];
  std::snprintf(n, sizeof n, "%02zu-", index);
  return n + f.name;
}

// Empty when the seed is right, else what is wrong.
std::string check_seed(const std::filesystem::path& path, const FormatSpec& want) {
  const std::vector<std::uint8_t> bytes = read_file_bytes(path.string());
  FuzzedDataProvider in(bytes.data(), bytes.size());
  const Case c = fuzz::CaseBuilder(in).build(path.string());
  if (c.format() != want.name) return "decodes to format '" + c.format() + "'";
  std::string missing;
  for (const auto* list : {&want.inputs, &want.outputs})
    for (const TensorSpec& t : *list)
      if (!c.find(t.name)) missing += " " + t.name;
  if (!missing.empty()) return "lacks" + missing;
  const ComparisonReport r =
      compare_cases(c, run_reference(want, c), fuzz::fuzzed_policy(want.default_tolerance, 0));
  if (!r.conformant) return "does not conform to the reference:\n" + report_markdown(r);
  return {};
}

void show(const Case& c, const char* which) {
  std::printf("%s\n", which);
  for (const auto& [k, v] : c.metadata) std::printf("  %s: %s\n", k.c_str(), v.c_str());
  for (const Tensor& t : c.tensors()) {
    std::string shape;
    for (std::int64_t d : t.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    std::printf("  %-20s %-8s [%s]\n", t.name.c_str(), std::string(dtype_name(t.dtype)).c_str(), shape.c_str());
  }
}

// The expected case a fuzz input decodes to, and the actual one fuzz_compare derives from it.
void decode(const std::string& path, const std::string& prefix) {
  const std::vector<std::uint8_t> bytes = read_file_bytes(path);
  FuzzedDataProvider in(bytes.data(), bytes.size());
  fuzz::CaseBuilder builder(in);
  const Case expected = builder.build(path);
  const Case actual = builder.related(expected, path);
  if (prefix.empty()) {
    show(expected, "expected (fuzz_inspect, fuzz_conform, fuzz_compare):");
    show(actual, "actual (fuzz_compare):");
    return;
  }
  write_case(prefix + ".expected.safetensors", expected);
  write_case(prefix + ".actual.safetensors", actual);
}

// The steps of fuzz_inspect, fuzz_conform or fuzz_compare on case files.
int replay(const std::string& target, const std::vector<std::string>& files) {
  std::string outcome = "a result";
  const bool clean = fuzz::clean_outcome(target.c_str(), [&] {
    try {
      const Case expected = read_case(files.at(0));
      const FormatSpec* spec = find_format(expected.format());
      if (target == "inspect" && spec) {
        const DequantizedState s = dequantized_state(*spec, expected);
        outcome = s.unavailable.empty() ? std::to_string(s.values.size()) + " dequantized values" : s.unavailable;
      } else if (target == "conform" && spec) {
        validate_case(*spec, expected, CaseScope::Complete);
        const ComparisonReport r =
            compare_cases(expected, run_reference(*spec, expected), fuzz::fuzzed_policy(spec->default_tolerance, 0));
        (void)report_json(r).dump(2);
        outcome = report_markdown(r).substr(0, 120);
      } else if (target == "compare" && files.size() == 2) {
        const ComparisonReport r = compare_cases(expected, read_case(files[1]),
                                                 fuzz::fuzzed_policy(spec ? spec->default_tolerance : "bit-exact", 0));
        (void)report_json(r).dump(2);
        outcome = r.conformant ? "conformant" : "not conformant";
      } else {
        outcome = "nothing to run (no registered format, or not two files for compare)";
      }
    } catch (const std::exception& e) {
      outcome = e.what();
      throw;
    }
  });
  std::printf("fuzz_cases replay %s: %s: %s\n", target.c_str(), clean ? "finished" : "refused", outcome.c_str());
  return 0;
}

int check_or_write_seeds(const std::filesystem::path& dir, bool write);

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "show" && argc == 3) decode(argv[2], "");
  else if (mode == "write" && argc == 4) decode(argv[2], argv[3]);
  else if ((mode == "check-seeds" || mode == "write-seeds") && argc == 3) return check_or_write_seeds(argv[2], mode == "write-seeds");
  else if (mode == "replay" && argc >= 4) return replay(argv[2], std::vector<std::string>(argv + 3, argv + argc));
  else {
    std::fprintf(stderr, "usage: fuzz_cases check-seeds DIR | write-seeds DIR | show FILE | write FILE PREFIX | "
                         "replay inspect|conform CASE | replay compare EXPECTED ACTUAL\n");
    return 2;
  }
  return 0;
}

namespace {

int check_or_write_seeds(const std::filesystem::path& dir, bool write) {
  const auto& formats = registered_formats();
  int failures = 0;
  for (std::size_t k = 0; k < formats.size(); ++k) {
    const std::filesystem::path path = dir / seed_name(k, formats[k]);
    if (write) {
      std::filesystem::create_directories(dir);
      std::ofstream(path, std::ios::binary).put(static_cast<char>(k));
      continue;
    }
    std::string fault;
    try {
      fault = std::filesystem::exists(path) ? check_seed(path, formats[k]) : "missing";
    } catch (const std::exception& e) {
      fault = std::string("refused: ") + e.what();
    }
    std::printf("fuzz_cases: %s: %s\n", path.filename().c_str(), fault.empty() ? "complete and conformant" : fault.c_str());
    failures += !fault.empty();
  }
  if (!write) std::printf("fuzz_cases: %zu seeds, %d failed\n", formats.size(), failures);
  return failures ? 1 : 0;
}

}  // namespace
