// The comparison engine: bitwise agreement, code and ulp distances, classification of each
// mismatch, tolerance policies, and the reports' contents.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "bits_printer.hpp"
#include "lowbit/compare.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/fp8.hpp"
#include "lowbit/tolerance.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

// A reference case of fp8.e4m3fn.satfinite over chosen inputs.
Case reference_case(const std::vector<float>& inputs) {
  Case in;
  in.origin = "expected.safetensors";
  in.metadata = {{"format", "fp8.e4m3fn.satfinite"}, {"params", R"({"nan_encoding":"cuda"})"}};
  in.add(Tensor::from_f32("input", {static_cast<std::int64_t>(inputs.size())}, inputs));
  Case c = run_reference(*find_format("fp8.e4m3fn.satfinite"), in);
  c.origin = "expected.safetensors";
  return c;
}

// `c` with codes[i] replaced (and dequant kept consistent, as a kernel's dump would be).
Case with_code(Case c, std::size_t i, std::uint8_t code) {
  c.origin = "actual.safetensors";
  c.find("codes")->bytes[i] = code;
  std::vector<float> d = c.find("dequant")->f32();
  d[i] = fp8::decode<fp8::E4M3FN>(code);
  c.add(Tensor::from_f32("dequant", c.find("dequant")->shape, d));
  return c;
}

const TensorComparison& tensor(const ComparisonReport& r, const std::string& name) {
  for (const auto& t : r.tensors)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  throw;
}

}  // namespace

TEST_CASE("identical cases conform with every element identical") {
  const Case e = reference_case({1.0f, -2.5f, 1000.0f, 0.0f});
  Case a = e;
  a.origin = "actual.safetensors";
  const ComparisonReport r = compare_cases(e, a, TolerancePolicy{});
  CHECK(r.conformant);
  for (const auto& t : r.tensors) {
    CHECK(t.mismatches == 0);
    CHECK(t.identical == t.elements);
  }
}

TEST_CASE("a tie, a near-boundary difference and a genuine one are told apart") {
  // 1.0625 lies exactly half-way between 1.0 (0x38) and 1.125 (0x39); 1.0626 just above it;
  // 3.0 (0x44) reported as 4.5 (0x49) is five codes away: no rounding explains it.
  const Case e = reference_case({1.0625f, 1.0626f, 3.0f, 5.0f});
  REQUIRE(e4m3(e.find("codes")->bytes[0]) == e4m3(0x38));
  REQUIRE(e4m3(e.find("codes")->bytes[1]) == e4m3(0x39));
  Case a = with_code(with_code(with_code(e, 0, 0x39), 1, 0x38), 2, 0x49);
  const ComparisonReport r = compare_cases(e, a, TolerancePolicy{});
  CHECK_FALSE(r.conformant);
  const TensorComparison& codes = tensor(r, "codes");
  CHECK(codes.mismatches == 3);
  CHECK(codes.by_class[static_cast<int>(MismatchClass::Tie)] == 1);
  CHECK(codes.by_class[static_cast<int>(MismatchClass::NearBoundary)] == 1);
  CHECK(codes.by_class[static_cast<int>(MismatchClass::Genuine)] == 1);
  REQUIRE(codes.first_mismatches.size() == 3);
  const MismatchRecord& near = codes.first_mismatches[1];
  CHECK(near.index == 1);
  CHECK(near.code_distance == 1);
  // 1.0626f - 1.0625 = 0.0001000165939331... = 838.9 binary32 ulps at 1.0625 (ulp 2^-23)
  CHECK(value(near.why.boundary_ulps) == doctest::Approx((double(1.0626f) - 1.0625) * 8388608.0));
  const MismatchRecord& genuine = codes.first_mismatches[2];
  CHECK(genuine.code_distance == 5);                        // 0x44 -> 0x49
  CHECK(genuine.ulp_distance == 0x40900000u - 0x40400000u);  // 3.0f -> 4.5f, by their bit patterns
  CHECK(codes.max_code_distance == 5);
  // the dequant tensor's mismatches are explained by the codes' classification
  CHECK(tensor(r, "dequant").by_class[static_cast<int>(MismatchClass::Tie)] == 1);

  TolerancePolicy lenient;
  lenient.name = "ties-and-1000-ulps";
  lenient.allow_ties = true;
  lenient.boundary_ulps = 1000;
  const ComparisonReport r2 = compare_cases(e, a, lenient);
  CHECK(tensor(r2, "codes").allowed == 2);
  CHECK_FALSE(r2.conformant);  // the genuine one is never allowed
  const ComparisonReport r3 = compare_cases(e, with_code(with_code(e, 0, 0x39), 1, 0x38), lenient);
  CHECK(r3.conformant);
}

TEST_CASE("worst block and block index use the case's block size") {
  std::vector<float> x(600, 3.0f);
  Case e = reference_case(x);
  e.metadata["params"] = R"({"nan_encoding":"cuda","block_size":256})";
  Case a = with_code(with_code(with_code(e, 10, 0x45), 300, 0x45), 301, 0x43);  // 3.0 is 0x44
  const ComparisonReport r = compare_cases(e, a, TolerancePolicy{});
  const TensorComparison& codes = tensor(r, "codes");
  CHECK(codes.block_size == 256);
  CHECK(codes.worst_block.index == 1);
  CHECK(codes.worst_block.mismatches == 2);
  CHECK(codes.worst_block.max_code_distance == 1);
  CHECK(codes.first_mismatches[1].block == 1);
}

TEST_CASE("a missing tensor or another dtype is a fault, not a pass") {
  const Case e = reference_case({1.0f, 2.0f});
  Case a = e;
  a.tensors.erase(a.tensors.begin());  // drop one tensor
  a.add(Tensor::from_f32("extra", {1}, std::vector<float>{1.0f}));
  const ComparisonReport r = compare_cases(e, a, TolerancePolicy{});
  CHECK_FALSE(r.conformant);
  int faults = 0;
  for (const auto& t : r.tensors) faults += !t.fault.empty();
  CHECK(faults == 1);
  CHECK(r.extra_in_actual == std::vector<std::string>{"extra"});
  Case b = e;
  b.find("codes")->dtype = DType::U8;
  CHECK_FALSE(compare_cases(e, b, TolerancePolicy{}).conformant);
}

TEST_CASE("the Markdown report names the differing element in hex and decimal") {
  const Case e = reference_case({1.0f, 2.0f, 3.0f});
  const ComparisonReport r = compare_cases(e, with_code(e, 2, 0x45), TolerancePolicy{});
  const std::string md = report_markdown(r);
  CHECK(md.find("NOT conformant") != std::string::npos);
  CHECK(md.find("| 2 | 0 | 0x44 (3) | 0x45 (3.25) | 1 |") != std::string::npos);
  const auto j = report_json(r);
  CHECK(j["conformant"] == false);
  const auto& codes = j["tensors"][1];  // tensors in the expected case's order: input, codes, dequant
  REQUIRE(codes["name"] == "codes");
  CHECK(codes["first_mismatches"][0]["index"] == 2);
  CHECK(codes["first_mismatches"][0]["class"] == "near-boundary");
}

TEST_CASE("tolerance policies are data: built-in, by name, by path; bad ones are refused") {
  CHECK(value(load_tolerance_policy("bit-exact", LOWBIT_POLICY_DIR).boundary_ulps) == value(0.0));
  const TolerancePolicy bnb = load_tolerance_policy("bnb-cuda", LOWBIT_POLICY_DIR);
  CHECK(value(bnb.boundary_ulps) == value(3.0));  // policies/bnb-cuda.json
  CHECK(bnb.allow_ties);
  CHECK_THROWS_WITH_AS(load_tolerance_policy("no-such-policy", LOWBIT_POLICY_DIR),
                       doctest::Contains("not among the shipped policies (no " LOWBIT_POLICY_DIR "/no-such-policy.json"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(load_tolerance_policy("bnb-cuda", "/no/such/folder"),
                       doctest::Contains("no /no/such/folder/bnb-cuda.json"), std::runtime_error);
}

TEST_CASE("a policy name is looked up only among the shipped policies; a file only when given as a path") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("lowbit_test_policy_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);
  auto write = [](const fs::path& p, const std::string& text) { std::ofstream(p) << text; };
  write("bnb-cuda", "not a policy");      // named like a shipped policy: must not replace it
  write("bnb-cuda.json", "not a policy");  // nor this one
  write("mine.json", R"({"name": "mine", "boundary_ulps": 1, "allow_ties": true})");

  const TolerancePolicy shipped = load_tolerance_policy("bnb-cuda", LOWBIT_POLICY_DIR);
  CHECK(shipped.name == "bnb-cuda");
  CHECK(value(shipped.boundary_ulps) == value(3.0));
  const TolerancePolicy by_extension = load_tolerance_policy("mine.json", LOWBIT_POLICY_DIR);
  CHECK(by_extension.name == "mine");
  CHECK(value(by_extension.boundary_ulps) == value(1.0));
  CHECK(load_tolerance_policy((dir / "mine.json").string(), LOWBIT_POLICY_DIR).name == "mine");
  CHECK_THROWS_WITH_AS(load_tolerance_policy("./bnb-cuda", LOWBIT_POLICY_DIR),
                       doctest::Contains("./bnb-cuda: not a valid tolerance policy"), std::runtime_error);
  CHECK_THROWS_WITH_AS(load_tolerance_policy("other.json", LOWBIT_POLICY_DIR),
                       doctest::Contains("tolerance policy file other.json: no such file"), std::runtime_error);

  fs::current_path(cwd);
  fs::remove_all(dir);
}
