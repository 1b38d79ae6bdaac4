// The comparison engine: bitwise agreement, code and ulp distances, classification of each
// mismatch, tolerance policies, and the reports' contents.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <cmath>
#include <string>
#include <vector>

#include "bits_printer.hpp"
#include "lowbit/compare.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/fp8.hpp"
#include "lowbit/tolerance.hpp"
#include "markdown_table.hpp"

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
  // near-boundary only within the policy's budget (here 1000 ulps; below, bit-exact's 0)
  TolerancePolicy budget;
  budget.boundary_ulps = 1000;
  const ComparisonReport r = compare_cases(e, a, budget);
  CHECK_FALSE(r.conformant);
  const TensorComparison& codes = tensor(r, "codes");
  CHECK(codes.mismatches == 3);
  CHECK(codes.by_class[static_cast<int>(MismatchClass::Tie)] == 1);
  CHECK(codes.by_class[static_cast<int>(MismatchClass::NearBoundary)] == 1);
  CHECK(codes.by_class[static_cast<int>(MismatchClass::Genuine)] == 1);
  const ComparisonReport exact = compare_cases(e, a, TolerancePolicy{});
  CHECK(tensor(exact, "codes").by_class[static_cast<int>(MismatchClass::NearBoundary)] == 0);
  CHECK(tensor(exact, "codes").by_class[static_cast<int>(MismatchClass::Genuine)] == 2);
  CHECK(tensor(exact, "codes").first_mismatches[1].why.cls == MismatchClass::Genuine);
  CHECK(value(tensor(exact, "codes").first_mismatches[1].why.boundary_ulps) ==
        doctest::Approx((double(1.0626f) - 1.0625) * 8388608.0));  // the distance stays in the entry
  // ... and the budget the tensor needs is the same under either policy (the tie counts as 0 ulps)
  CHECK(value(tensor(exact, "codes").max_boundary_ulps) == doctest::Approx((double(1.0626f) - 1.0625) * 8388608.0));
  CHECK(value(codes.max_boundary_ulps) == value(tensor(exact, "codes").max_boundary_ulps));
  CHECK(value(tensor(compare_cases(e, with_code(e, 0, 0x39), TolerancePolicy{}), "codes").max_boundary_ulps) == value(0.0));
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

TEST_CASE("a tensor its format does not block is one block, the whole tensor") {
  // an element-wise cast has no blocks: every mismatch is in block 0 and the block is the tensor
  std::vector<float> x(600, 3.0f);
  const Case e = reference_case(x);
  const Case a = with_code(with_code(with_code(e, 10, 0x45), 300, 0x45), 301, 0x43);  // 3.0 is 0x44
  const ComparisonReport r = compare_cases(e, a, TolerancePolicy{});
  const TensorComparison& codes = tensor(r, "codes");
  CHECK(codes.block_size == 600);
  CHECK(codes.worst_block.index == 0);
  CHECK(codes.worst_block.mismatches == 3);
  CHECK(codes.first_mismatches[1].block == 0);
}

TEST_CASE("a case whose params its format does not know is refused, naming the file") {
  Case e = reference_case({1.0f});
  e.metadata["params"] = R"({"nan_encoding":"cuda","block_size":256})";
  CHECK_THROWS_WITH_AS(compare_cases(e, e, TolerancePolicy{}),
                       doctest::Contains("expected.safetensors: format fp8.e4m3fn.satfinite has no parameter 'block_size'"),
                       CaseError);
}

TEST_CASE("a missing tensor or another dtype is a fault, not a pass") {
  const Case e = reference_case({1.0f, 2.0f});
  Case a = e;
  a.remove(a.tensors().front().name);  // drop one tensor
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

TEST_CASE("the code distance of I64 values far apart is exact, without a signed overflow") {
  // found by fuzz_compare: ev - av in int64 overflowed (UBSan) for values of opposite signs. (2^64 - 1,
  // from INT64_MIN to INT64_MAX, would read as kNoDistance, the NaN marker: one less is the largest.)
  const std::int64_t lo = INT64_MIN, hi = INT64_MAX - 1;
  Case e;
  e.origin = "expected.safetensors";
  e.add(Tensor::from_i64("step", {3}, std::vector<std::int64_t>{lo, -2, hi}));
  Case a = e;
  a.origin = "actual.safetensors";
  a.add(Tensor::from_i64("step", {3}, std::vector<std::int64_t>{hi, 3, lo}));
  const ComparisonReport r = compare_cases(e, a, TolerancePolicy{});
  const TensorComparison& t = tensor(r, "step");
  REQUIRE(t.first_mismatches.size() == 3);
  CHECK(t.first_mismatches[0].code_distance == UINT64_MAX - 1);  // 2^64 - 2
  CHECK(t.first_mismatches[1].code_distance == 5);
  CHECK(t.first_mismatches[2].code_distance == UINT64_MAX - 1);
  CHECK(t.max_code_distance == UINT64_MAX - 1);
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
  // 3.0 lies 2^19 ulps from the boundary 3.125: under bit-exact's budget of 0 ulps, genuine, the
  // distance and what the cast saw kept in the entry
  CHECK(codes["first_mismatches"][0]["class"] == "genuine");
  CHECK(codes["first_mismatches"][0]["boundary_ulps"] == 524288.0);
  CHECK(codes["first_mismatches"][0]["input"] == 3.0);
  CHECK(codes["first_mismatches"][0]["boundary"] == 3.125);
  CHECK(!codes["first_mismatches"][0].contains("scaled"));  // a cast rounds its input itself
  CHECK(md.find("| genuine (5.24e+05 ulp from the boundary) | no | input 3, boundary 3.125 |") != std::string::npos);
}

TEST_CASE("hostile names, origins, format, policy and faults keep every Markdown table row's columns") {
  // Each text a file or a user supplies, made to end a cell, a code span or a line, and to inject HTML.
  const std::string evil = "n|a`m`e\n| forged | row |\x1b[31m</td><script>alert(1)</script>";
  const Case e = reference_case({1.0f, 2.0f, 3.0f});
  ComparisonReport r = compare_cases(e, with_code(e, 2, 0x45), TolerancePolicy{});
  const std::string benign = report_markdown(r);
  r.expected_origin = r.actual_origin = r.format = r.policy.name = r.policy.description = evil;
  r.extra_in_actual = {evil};
  for (TensorComparison& t : r.tensors) t.name = t.layout = evil;
  TensorComparison missing = r.tensors.front();
  missing.fault = missing.dtype = evil;
  r.tensors.push_back(missing);
  const std::string md = report_markdown(r);

  // the benign report's lines plus the fault's row and the extra tensor's line: nothing forged a line
  CHECK(std::count(md.begin(), md.end(), '\n') == std::count(benign.begin(), benign.end(), '\n') + 2);
  CHECK_FALSE(has_control_bytes(md));
  CHECK(md.find("<script>alert(1)</script>`") != std::string::npos);  // inside a code span: shown, not run
  CHECK(md.find("\\<script\\>") != std::string::npos);               // in running text: escaped
  CHECK(md.find("| `n\\x7Ca\\x60m\\x60e\\n\\x7C forged \\x7C row \\x7C\\x1B[31m</td><script>alert(1)</script>` |") !=
        std::string::npos);
  // every row of a table has its header's columns; the rows are the benign report's and the fault's
  CHECK(checked_table_rows(md) == checked_table_rows(benign) + 1);
  CHECK(checked_table_rows(benign) >= 2 + 3 + 1);  // separators, three tensors, a mismatch at least
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
  // a file of the user's is named by its path and hash (the hash itself: test_hostile_inputs, against sha256sum)
  CHECK(by_extension.file == "mine.json");
  CHECK(by_extension.file_sha256.size() == 64);
  CHECK(by_extension.name == "mine (file mine.json, sha256 " + by_extension.file_sha256 + ")");
  CHECK(value(by_extension.boundary_ulps) == value(1.0));
  CHECK(load_tolerance_policy((dir / "mine.json").string(), LOWBIT_POLICY_DIR).name.rfind("mine (file " + (dir / "mine.json").string(), 0) == 0);
  CHECK(shipped.file.empty());
  CHECK_THROWS_WITH_AS(load_tolerance_policy("./bnb-cuda", LOWBIT_POLICY_DIR),
                       doctest::Contains("./bnb-cuda: not a valid tolerance policy"), std::runtime_error);
  CHECK_THROWS_WITH_AS(load_tolerance_policy("other.json", LOWBIT_POLICY_DIR),
                       doctest::Contains("tolerance policy file other.json: no such file"), std::runtime_error);

  fs::current_path(cwd);
  fs::remove_all(dir);
}

// ---- layouts: which block (and which scale entry) each element belongs to --------------------------

namespace {

// Flips the lowest bit of element i (the element differs, nothing else does).
void flip(Case& c, const std::string& tensor, std::size_t i) {
  Tensor* t = c.find(tensor);
  REQUIRE(t != nullptr);
  REQUIRE(i < t->element_count());
  t->bytes[i * dtype_size(t->dtype)] ^= 1;
}

// A reference case of `format` with params over a 2-D input of m x n varied values.
Case coat_act_case(const std::string& format, std::int64_t m, std::int64_t n, const std::string& params) {
  std::vector<float> x(static_cast<std::size_t>(m * n));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(static_cast<float>(static_cast<int>((i * 37) % 101) - 50), -3);
  Case in;
  in.metadata = {{"format", format}, {"params", params}};
  in.add(Tensor::from_f32("input", {m, n}, x));
  Case c = run_reference(*find_format(format), in);
  c.origin = "expected.safetensors";
  return c;
}

// Every mismatch of the tensor: its index, block and class, in index order.
struct Seen {
  std::size_t index, block;
  MismatchClass cls;
};
std::vector<Seen> mismatches_of(const ComparisonReport& r, const std::string& name) {
  std::vector<Seen> v;
  const TensorComparison& t = tensor(r, name);
  REQUIRE(t.first_mismatches.size() == t.mismatches);  // all listed
  for (const MismatchRecord& m : t.first_mismatches) v.push_back({m.index, m.block, m.why.cls});
  return v;
}

std::uint64_t count(const TensorComparison& t, MismatchClass c) { return t.by_class[static_cast<std::size_t>(c)]; }

// Checks that the tensor's mismatches are exactly `indices`, all in block `block` with class `cls`.
void check_mismatches(const ComparisonReport& r, const std::string& name, const std::vector<std::size_t>& indices,
                      std::size_t block, MismatchClass cls) {
  CAPTURE(name);
  const std::vector<Seen> seen = mismatches_of(r, name);
  REQUIRE(seen.size() == indices.size());
  for (std::size_t k = 0; k < seen.size(); ++k) {
    CAPTURE(k);
    CHECK(seen[k].index == indices[k]);
    CHECK(seen[k].block == block);
    CHECK(seen[k].cls == cls);
  }
  const TensorComparison& t = tensor(r, name);
  CHECK(count(t, cls) == indices.size());
  CHECK(t.worst_block.index == block);
  CHECK(t.worst_block.mismatches == indices.size());
}

void check_identical(const ComparisonReport& r, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    CAPTURE(name);
    CHECK(tensor(r, name).mismatches == 0);
  }
}

// The row-major indices of rows [r0, r1) x columns [c0, c1) of a matrix with `columns` columns.
std::vector<std::size_t> rectangle(std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1, std::size_t columns) {
  std::vector<std::size_t> v;
  for (std::size_t r = r0; r < r1; ++r)
    for (std::size_t c = c0; c < c1; ++c) v.push_back(r * columns + c);
  return v;
}

constexpr std::size_t kAll = 100000;  // list every mismatch

}  // namespace

TEST_CASE("coat.act.perblock: a changed 16x16 tile's codes are scale-propagated, its scale is the tile's block") {
  // 32 x 48 input, QB = 16: a 2 x 3 grid of tiles, scale 2 x 3; tile (1, 2) is scale element 1*3 + 2 = 5
  // and holds rows 16..31, columns 32..47.
  const Case e = coat_act_case("coat.act.perblock", 32, 48, R"({"group_size":16})");
  REQUIRE(e.require("scale").shape == std::vector<std::int64_t>{2, 3});
  Case a = e;
  a.origin = "actual.safetensors";
  const std::vector<std::size_t> tile = rectangle(16, 32, 32, 48, 48);
  REQUIRE(tile.size() == 256);
  flip(a, "scale", 5);
  for (std::size_t i : tile) flip(a, "codes", i);

  SUBCASE("only the tile differs") {
    const ComparisonReport r = compare_cases(e, a, TolerancePolicy{}, kAll);
    check_mismatches(r, "codes", tile, 5, MismatchClass::ScalePropagated);
    check_mismatches(r, "scale", {5}, 5, MismatchClass::Genuine);
    check_identical(r, {"input"});
    CHECK(tensor(r, "codes").block_size == 256);
    CHECK(tensor(r, "scale").block_size == 1);
  }
  SUBCASE("a code of another tile whose scale agrees is genuine") {
    // row 1, column 32 is index 80: tile (0, 2) = block 2 (in blocks of 16 it would be block 5)
    flip(a, "codes", 80);
    const ComparisonReport r = compare_cases(e, a, TolerancePolicy{}, kAll);
    const std::vector<Seen> seen = mismatches_of(r, "codes");
    REQUIRE(seen.size() == 257);
    CHECK(seen[0].index == 80);
    CHECK(seen[0].block == 2);
    CHECK(seen[0].cls == MismatchClass::Genuine);
    CHECK(count(tensor(r, "codes"), MismatchClass::ScalePropagated) == 256);
    CHECK(tensor(r, "codes").worst_block.index == 5);
  }
}

TEST_CASE("coat.act.pergroup: a changed 1x16 row group's codes are scale-propagated, its scale is the group's block") {
  // 32 x 64 input, QB = 16: scale 32 x 4; row 5's group 2 is scale element 5*4 + 2 = 22, columns 32..47
  const Case e = coat_act_case("coat.act.pergroup", 32, 64, R"({"group_size":16})");
  REQUIRE(e.require("scale").shape == std::vector<std::int64_t>{32, 4});
  Case a = e;
  a.origin = "actual.safetensors";
  const std::vector<std::size_t> group = rectangle(5, 6, 32, 48, 64);
  flip(a, "scale", 22);
  for (std::size_t i : group) flip(a, "codes", i);
  const ComparisonReport r = compare_cases(e, a, TolerancePolicy{}, kAll);
  check_mismatches(r, "codes", group, 22, MismatchClass::ScalePropagated);
  check_mismatches(r, "scale", {22}, 22, MismatchClass::Genuine);
  check_identical(r, {"input"});
}

TEST_CASE("coat.act.pergroup.transposed: codes_t's groups run along M and belong to scale_t") {
  // 32 x 16 input, QB = 16: codes 32 x 16 with scale 32 x 1; codes_t 16 x 32 with scale_t 16 x 2.
  // codes_t's row 3, group 1 is scale_t element 3*2 + 1 = 7, codes_t columns 16..31.
  const Case e = coat_act_case("coat.act.pergroup.transposed", 32, 16, R"({"group_size":16})");
  REQUIRE(e.require("scale_t").shape == std::vector<std::int64_t>{16, 2});
  Case a = e;
  a.origin = "actual.safetensors";
  const std::vector<std::size_t> group = rectangle(3, 4, 16, 32, 32);
  flip(a, "scale_t", 7);
  for (std::size_t i : group) flip(a, "codes_t", i);
  SUBCASE("only the group differs") {
    const ComparisonReport r = compare_cases(e, a, TolerancePolicy{}, kAll);
    check_mismatches(r, "codes_t", group, 7, MismatchClass::ScalePropagated);
    check_mismatches(r, "scale_t", {7}, 7, MismatchClass::Genuine);
    check_identical(r, {"input", "codes", "scale"});
  }
  SUBCASE("scale_t does not explain codes, nor scale codes_t") {
    // codes (32 x 16) element 7*16 = 112 is row 7's only group: scale element 7, which agrees
    flip(a, "codes", 112);
    flip(a, "scale", 3);
    flip(a, "codes_t", 0);  // codes_t row 0, group 0: scale_t element 0, which agrees
    const ComparisonReport r = compare_cases(e, a, TolerancePolicy{}, kAll);
    check_mismatches(r, "codes", {112}, 7, MismatchClass::Genuine);
    check_mismatches(r, "scale", {3}, 3, MismatchClass::Genuine);
    const std::vector<Seen> t = mismatches_of(r, "codes_t");
    REQUIRE(t.size() == 17);
    CHECK(t[0].index == 0);
    CHECK(t[0].block == 0);
    CHECK(t[0].cls == MismatchClass::Genuine);
  }
}

namespace {

// A reference step of an optimizer format from its fresh state, with a varied gradient.
Case optimizer_case(const std::string& format, std::size_t n) {
  const FormatSpec& f = *find_format(format);
  std::vector<float> param(n);
  for (std::size_t i = 0; i < n; ++i) param[i] = std::ldexp(static_cast<float>(static_cast<int>(i % 29) - 14), -4);
  Case in = f.fresh_state(param, f.default_params);
  std::vector<float> grad(n);
  for (std::size_t i = 0; i < n; ++i) grad[i] = std::ldexp(static_cast<float>(static_cast<int>((i * 7) % 13) - 6), -10);
  in.add(Tensor::from_f32("grad", {static_cast<std::int64_t>(n)}, grad));
  in.metadata = {{"format", format}, {"params", "{}"}};
  Case c = run_reference(f, in);
  c.origin = "expected.safetensors";
  return c;
}

}  // namespace

TEST_CASE("bnb.adam8bit.cpu: each state's codes belong to blocks of 256 of its own scale, the last one partial") {
  // 600 elements: blocks 0..255, 256..511 and 512..599
  const Case e = optimizer_case("bnb.adam8bit.cpu", 600);
  REQUIRE(e.require("exp_avg.scale.next").element_count() == 3);
  Case a = e;
  a.origin = "actual.safetensors";
  flip(a, "exp_avg.scale.next", 2);
  flip(a, "exp_avg.codes.next", 512);
  flip(a, "exp_avg.codes.next", 599);
  flip(a, "exp_avg_sq.scale.next", 0);
  flip(a, "exp_avg_sq.codes.next", 3);
  flip(a, "exp_avg_sq.codes.next", 255);
  SUBCASE("each changed block's codes are scale-propagated") {
    const ComparisonReport r = compare_cases(e, a, TolerancePolicy{}, kAll);
    check_mismatches(r, "exp_avg.codes.next", {512, 599}, 2, MismatchClass::ScalePropagated);
    check_mismatches(r, "exp_avg.scale.next", {2}, 2, MismatchClass::Genuine);
    check_mismatches(r, "exp_avg_sq.codes.next", {3, 255}, 0, MismatchClass::ScalePropagated);
    check_mismatches(r, "exp_avg_sq.scale.next", {0}, 0, MismatchClass::Genuine);
    check_identical(r, {"param.next", "param", "exp_avg.codes", "exp_avg.scale", "exp_avg_sq.codes", "exp_avg_sq.scale"});
    CHECK(tensor(r, "exp_avg.codes.next").block_size == 256);
  }
  SUBCASE("the other state's scale explains nothing") {
    // block 1 of exp_avg_sq's scale differs; exp_avg's code 300 lies in block 1 of exp_avg's scale, which agrees
    flip(a, "exp_avg_sq.scale.next", 1);
    flip(a, "exp_avg.codes.next", 300);
    const ComparisonReport r = compare_cases(e, a, TolerancePolicy{}, kAll);
    const std::vector<Seen> m = mismatches_of(r, "exp_avg.codes.next");
    REQUIRE(m.size() == 3);
    CHECK(m[0].index == 300);
    CHECK(m[0].block == 1);
    CHECK(m[0].cls == MismatchClass::Genuine);
    CHECK(m[1].cls == MismatchClass::ScalePropagated);
    CHECK(m[2].cls == MismatchClass::ScalePropagated);
    CHECK(tensor(r, "exp_avg.codes.next").worst_block.index == 2);
    const std::vector<Seen> s = mismatches_of(r, "exp_avg_sq.scale.next");
    REQUIRE(s.size() == 2);
    CHECK(s[1].index == 1);
    CHECK(s[1].block == 1);
  }
}

TEST_CASE("coat.optim.expand.e4m3: a group's codes belong to its scale, expand and centre entries") {
  // 300 elements: groups 0..127, 128..255 and 256..299
  const Case e = optimizer_case("coat.optim.expand.e4m3", 300);
  REQUIRE(e.require("exp_avg.expand.next").element_count() == 3);
  Case a = e;
  a.origin = "actual.safetensors";
  flip(a, "exp_avg.expand.next", 1);  // only the expansion exponent of exp_avg's group 1
  flip(a, "exp_avg.codes.next", 128);
  flip(a, "exp_avg.codes.next", 255);
  flip(a, "exp_avg_sq.centre.next", 2);  // only the centre of exp_avg_sq's tail group
  flip(a, "exp_avg_sq.codes.next", 299);
  const ComparisonReport r = compare_cases(e, a, TolerancePolicy{}, kAll);
  check_mismatches(r, "exp_avg.codes.next", {128, 255}, 1, MismatchClass::ScalePropagated);
  check_mismatches(r, "exp_avg.expand.next", {1}, 1, MismatchClass::Genuine);
  check_mismatches(r, "exp_avg_sq.codes.next", {299}, 2, MismatchClass::ScalePropagated);
  check_mismatches(r, "exp_avg_sq.centre.next", {2}, 2, MismatchClass::Genuine);
  check_identical(r, {"param.next", "exp_avg.scale.next", "exp_avg.centre.next", "exp_avg_sq.scale.next",
                      "exp_avg_sq.expand.next"});
}

TEST_CASE("a per-block tensor whose size disagrees with the layout is refused, naming the file") {
  Case e = coat_act_case("coat.act.pergroup", 32, 64, R"({"group_size":16})");
  e.add(Tensor::from_f32("scale", {32, 2}, std::vector<float>(64, 1.0f)));  // 128 groups need 128 entries
  CHECK_THROWS_WITH_AS(compare_cases(e, e, TolerancePolicy{}),
                       doctest::Contains("expected.safetensors: format coat.act.pergroup, tensor 'scale': has 64 element(s), "
                                         "but must have 128 (one per block of 'codes')"),
                       CaseError);
}

TEST_CASE("layouts resolve to block indices by hand") {
  const nlohmann::json p = {{"block_size", 256}, {"group_size", 16}, {"whole", -1}, {"odd", 3}};
  SUBCASE("1-D blocks with a partial tail") {
    const BlockMap m = resolve_layout(blocks(param_extent("block_size"), {"scale"}), {600}, p);
    CHECK(m.blocks == 3);
    CHECK(m.block_elements() == 256);
    CHECK(m.block_of(255) == 0);
    CHECK(m.block_of(256) == 1);
    CHECK(m.block_of(599) == 2);
  }
  SUBCASE("1-D blocks over a 2-D tensor run over the flattened elements") {
    const BlockMap m = resolve_layout(blocks(elements(4), {}), {3, 5}, p);  // 15 elements: 4 blocks
    CHECK(m.blocks == 4);
    CHECK(m.block_of(7) == 1);
    CHECK(m.block_of(14) == 3);
  }
  SUBCASE("row groups") {
    const BlockMap m = resolve_layout(row_groups(param_extent("group_size"), {}), {32, 64}, p);
    CHECK(m.blocks == 128);
    CHECK(m.block_of(5 * 64 + 32) == 22);
    CHECK(m.block_of(5 * 64 + 63) == 23);
  }
  SUBCASE("tiles, row-major over the grid") {
    const BlockMap m = resolve_layout(tiles(param_extent("group_size"), param_extent("group_size"), {}), {32, 48}, p);
    CHECK(m.blocks == 6);
    CHECK(m.block_elements() == 256);
    CHECK(m.block_of(1 * 48 + 32) == 2);
    CHECK(m.block_of(16 * 48 + 0) == 3);
    CHECK(m.block_of(31 * 48 + 47) == 5);
    CHECK(m.description == "16x16 tiles");
  }
  SUBCASE("-1 is the whole axis") {
    const BlockMap m = resolve_layout(tiles(elements(1), param_extent_or_whole_axis("whole"), {}), {4, 6}, p);
    CHECK(m.blocks == 4);
    CHECK(m.block_of(2 * 6 + 5) == 2);
  }
  SUBCASE("one block per tensor, one element per block") {
    CHECK(resolve_layout(per_tensor({"scale"}), {4, 4}, p).blocks == 1);
    CHECK(resolve_layout(per_tensor({"scale"}), {4, 4}, p).block_of(15) == 0);
    CHECK(resolve_layout(Layout{}, {7}, p).block_elements() == 7);
    const BlockMap entries = resolve_layout(block_entries(), {2, 3}, p);
    CHECK(entries.blocks == 6);
    CHECK(entries.block_of(5) == 5);
  }
  SUBCASE("packed codes: two a byte") {
    const BlockMap m = resolve_layout(blocks(param_extent("block_size", 2), {}), {1024}, p);
    CHECK(m.blocks == 8);
    CHECK(m.block_of(127) == 0);
    CHECK(m.block_of(128) == 1);
    CHECK(m.straddling == 1);
  }
  SUBCASE("packed codes across blocks: an odd block size (torchao's 4-bit packing)") {
    const nlohmann::json three = {{"block_size", 3}};
    const BlockMap m = resolve_layout(blocks(packed_param_extent("block_size", 2), {}), {6}, three);
    CHECK(m.blocks == 4);  // 12 elements in blocks of 3
    CHECK(m.straddling == 2);
    // byte k holds elements 2k and 2k + 1, and lies in the block of element 2k: 0, 0, 1, 2, 2, 3
    CHECK(std::vector<std::size_t>{m.block_of(0), m.block_of(1), m.block_of(2), m.block_of(3), m.block_of(4), m.block_of(5)} ==
          std::vector<std::size_t>{0, 0, 1, 2, 2, 3});
    // one element a block: each byte holds two blocks and lies in its first element's (this divided
    // by zero, SIGFPE in compare and conform, before verify's battery ran torchao's 4-bit at block_size 1)
    const nlohmann::json one = {{"block_size", 1}};
    const BlockMap ones = resolve_layout(blocks(packed_param_extent("block_size", 2), {}), {3}, one);
    CHECK(ones.blocks == 6);
    CHECK(ones.straddling == 2);
    CHECK(std::vector<std::size_t>{ones.block_of(0), ones.block_of(1), ones.block_of(2)} == std::vector<std::size_t>{0, 2, 4});
    // an even block size keeps the plain layout of whole bytes
    const BlockMap even = resolve_layout(blocks(packed_param_extent("block_size", 2), {}), {1024}, p);
    CHECK(even.straddling == 1);
    CHECK(even.blocks == 8);
    CHECK(even.block_of(128) == 1);
  }
  SUBCASE("bad parameters name themselves") {
    CHECK_THROWS_WITH_AS(resolve_layout(blocks(param_extent("nope"), {}), {4}, p),
                         "nope must be a whole number from 1 to 2147483647 (it is missing)", std::invalid_argument);
    CHECK_THROWS_WITH_AS(resolve_layout(blocks(param_extent("odd", 2), {}), {4}, p),
                         "odd (3) must be a multiple of 2: 2 per stored element", std::invalid_argument);
    // -1 means the whole axis only where the layout says so (COAT's block_cut); a block size of -1 is refused
    CHECK_THROWS_WITH_AS(resolve_layout(blocks(param_extent("whole"), {}), {4}, p),
                         "whole must be a whole number from 1 to 2147483647 (got -1)", std::invalid_argument);
    const nlohmann::json huge = {{"block_size", 2147483648LL}};
    CHECK_THROWS_AS(resolve_layout(blocks(param_extent("block_size"), {}), {4}, huge), std::invalid_argument);
  }
}

TEST_CASE("the library-rounding share is of the numeric mismatches, the NaN encodings named apart") {
  // a NaN input whose code the kernel writes with the sign flipped (0x7F -> 0xFF: nan-encoding) and
  // a 1.0 written as the next code (genuine): 2 mismatching codes, 1 of them numeric
  const Case e = reference_case({1.0f, std::nanf(""), 2.0f, 3.0f});
  REQUIRE(e.find("codes")->bytes[1] == 0x7F);
  const Case a = with_code(with_code(e, 1, 0xFF), 0, 0x39);
  ComparisonTotals t;
  t.add(compare_cases(e, a, TolerancePolicy{}));
  REQUIRE(t.count(MismatchClass::NanEncoding) == 2);  // the code and its dequant
  REQUIRE(t.mismatches == 4);
  CHECK(library_rounding_text(t, TolerancePolicy{}) ==
        "library-rounding: 0 of 2 numeric mismatches (0.0 %; 2 NaN encodings apart), not allowed");
  const nlohmann::json j = library_rounding_json(t, TolerancePolicy{});
  CHECK(j.at("mismatches") == 4);  // the key's first meaning: all mismatches
  CHECK(j.at("nan_encodings") == 2);

  // counts alone: 3 library roundings among 40 numeric mismatches and 2 NaN encodings; and without them
  ComparisonTotals counts;
  counts.mismatches = 42;
  counts.by_class[static_cast<std::size_t>(MismatchClass::LibraryRounding)] = 3;
  counts.by_class[static_cast<std::size_t>(MismatchClass::NanEncoding)] = 2;
  TolerancePolicy allowing;
  allowing.allow_library_rounding = true;
  CHECK(library_rounding_text(counts, allowing) ==
        "library-rounding: 3 of 40 numeric mismatches (7.5 %; 2 NaN encodings apart), allowed by the policy");
  CHECK(library_rounding_json(counts, allowing).at("rate").get<double>() == 3.0 / 42.0);
  counts.mismatches = 40;
  counts.by_class[static_cast<std::size_t>(MismatchClass::NanEncoding)] = 0;
  CHECK(library_rounding_text(counts, allowing) == "library-rounding: 3 of 40 mismatches (7.5 %), allowed by the policy");
}
