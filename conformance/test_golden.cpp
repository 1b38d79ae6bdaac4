// The reference against every golden case exported from the official packages (golden/, listed
// with sha256 in golden/MANIFEST.json): each case's outputs, recomputed by the reference from its
// inputs, must equal the official outputs bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "golden_fixture.hpp"
#include "lowbit/compare.hpp"

using namespace lowbit;
using lowbit::test::golden_case;
using lowbit::test::golden_entries;
using lowbit::test::golden_manifest;

TEST_CASE("every golden case equals the reference bit for bit") {
  const Manifest& manifest = golden_manifest();
  REQUIRE_MESSAGE(!manifest.files.empty(), "golden/MANIFEST.json lists no cases");
  std::map<std::string, int> cases_per_format;
  std::uint64_t elements = 0, library_rounding = 0;
  for (const ManifestEntry& e : manifest.files) {
    CAPTURE(e.path);
    const Case expected = golden_case(e);  // refuses a file whose hash disagrees
    const FormatSpec* spec = find_format(expected.format());
    REQUIRE_MESSAGE(spec, "unregistered format " << expected.format());
    const TolerancePolicy policy = load_tolerance_policy(spec->default_tolerance, LOWBIT_POLICY_DIR);
    const ComparisonReport r = compare_cases(expected, run_reference(*spec, expected), policy);
    for (const TensorComparison& t : r.tensors) {
      CAPTURE(t.name);
      CHECK(t.fault.empty());
      // bit-exact, except where the format's documented policy accepts a proven library rounding
      const auto library = t.by_class[static_cast<std::size_t>(MismatchClass::LibraryRounding)];
      CHECK(t.mismatches == (policy.allow_library_rounding ? library : 0));
      library_rounding += library;
      elements += t.elements;
    }
    CHECK(r.conformant);
    ++cases_per_format[spec->name];
  }
  // Each official source's formats are all represented.
  for (const char* name : {"torchao.qmap", "bnb.qmap", "torchao.codebook8.signed", "torchao.codebook8.unsigned",
                           "torchao.codebook4.signed", "torchao.codebook4.unsigned", "torchao.fp8",
                           "bnb.blockwise8.dynamic", "bnb.blockwise8.linear", "torchao.adam.codebook8",
                           "torchao.adam.codebook4", "torchao.adam.fp8", "torchao.adam.dense", "bnb.adam8bit.cpu",
                           "coat.act.pergroup", "coat.act.pertensor.groupscale", "coat.act.pergroup.transposed",
                           "coat.act.perblock", "coat.fake.floatexmy.triton", "coat.fake.floatexmy.torch",
                           "coat.fake.symm"}) {
    CAPTURE(name);
    CHECK(cases_per_format[name] > 0);
  }
  MESSAGE("golden cases: " << manifest.files.size() << ", elements compared: " << elements
                            << ", explained by a library's rounding: " << library_rounding);
}

TEST_CASE("library rounding needs both sides reproduced: a parameter no one-ulp sqrt explains is genuine") {
  const auto entries = golden_entries("torchao.adam.codebook8", "*/adamw.step2.safetensors");  // float32 param
  REQUIRE_FALSE(entries.empty());
  const Case expected = golden_case(*entries.front());
  Case actual = run_reference(*find_format(expected.format()), expected);
  std::vector<float> p = actual.require("param.next").f32();
  for (int k = 0; k < 5; ++k) p[100] = std::nextafter(p[100], INFINITY);  // five ulps off: no sqrt rounding does that
  actual.add(Tensor::from_f32("param.next", actual.require("param.next").shape, p));
  const ComparisonReport r = compare_cases(expected, actual, load_tolerance_policy("torch-cpu-eager", LOWBIT_POLICY_DIR));
  CHECK_FALSE(r.conformant);
  for (const TensorComparison& t : r.tensors)
    if (t.name == "param.next") CHECK(t.by_class[static_cast<std::size_t>(MismatchClass::Genuine)] >= 1);
}
