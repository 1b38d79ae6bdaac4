// The reference against every golden case exported from the official packages (golden/, listed
// with sha256 in golden/MANIFEST.json): each case's outputs, recomputed by the reference from its
// inputs, must equal the official outputs bit for bit.
#include <doctest/doctest.h>

#include <map>

#include "lowbit/compare.hpp"
#include "lowbit/manifest.hpp"

using namespace lowbit;

TEST_CASE("every golden case equals the reference bit for bit") {
  const Manifest manifest = read_manifest(LOWBIT_GOLDEN_DIR);
  REQUIRE_MESSAGE(!manifest.files.empty(), "golden/MANIFEST.json lists no cases");
  std::map<std::string, int> cases_per_format;
  std::uint64_t elements = 0;
  for (const ManifestEntry& e : manifest.files) {
    CAPTURE(e.path);
    const Case expected = read_verified_case(LOWBIT_GOLDEN_DIR, e);  // refuses a file whose hash disagrees
    const FormatSpec* spec = find_format(expected.format());
    REQUIRE_MESSAGE(spec, "unregistered format " << expected.format());
    const ComparisonReport r = compare_cases(expected, run_reference(*spec, expected), TolerancePolicy{});
    for (const TensorComparison& t : r.tensors) {
      CAPTURE(t.name);
      CHECK(t.fault.empty());
      CHECK(t.mismatches == 0);
      elements += t.elements;
    }
    CHECK(r.conformant);
    ++cases_per_format[spec->name];
  }
  // Each official source's formats are all represented.
  for (const char* name : {"torchao.qmap", "bnb.qmap", "torchao.codebook8.signed", "torchao.codebook8.unsigned",
                           "torchao.codebook4.signed", "torchao.codebook4.unsigned", "torchao.fp8",
                           "bnb.blockwise8.dynamic", "bnb.blockwise8.linear"}) {
    CAPTURE(name);
    CHECK(cases_per_format[name] > 0);
  }
  MESSAGE("golden cases: " << manifest.files.size() << ", elements compared: " << elements);
}
