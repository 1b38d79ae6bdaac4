// libFuzzer target: compare on two related well-formed cases, an expected one and an actual one
// derived from it (a few codes or floats changed, tensors dropped, retyped or reshaped), under the
// format's default or a shipped tolerance policy, with both reports rendered, as `lowbit compare`
// does. A result or a clean refusal; anything else is a bug (fuzz_outcome.hpp).
#include <cstdint>

#include "fuzz_case_builder.hpp"
#include "fuzz_outcome.hpp"
#include "fuzz_policies.hpp"
#include "lowbit/compare.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  lowbit::fuzz::CaseBuilder builder(in);
  const lowbit::Case expected = builder.build("expected.safetensors");
  const lowbit::Case actual = builder.related(expected, "actual.safetensors");
  const lowbit::FormatSpec* spec = lowbit::find_format(expected.format());
  const lowbit::TolerancePolicy& policy =
      lowbit::fuzz::fuzzed_policy(spec ? spec->default_tolerance : "bit-exact", builder.alternative(3));
  const std::size_t max_listed = builder.alternative(2) ? builder.pick(4) : 20;
  lowbit::fuzz::clean_outcome("compare", [&] {
    const lowbit::ComparisonReport r = lowbit::compare_cases(expected, actual, policy, max_listed);
    (void)lowbit::report_json(r).dump(2);
    (void)lowbit::report_markdown(r);
  });
  return 0;
}
