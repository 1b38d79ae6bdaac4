// libFuzzer target: conform on a well-formed case of any registered format (fuzz_case_builder.hpp): the
// schema check of a complete case, the reference on its inputs, compared with its outputs under the
// format's default tolerance policy, both reports rendered, as `lowbit conform` does for each golden
// case. A result or a clean refusal; anything else is a bug (fuzz_outcome.hpp).
#include <cstdint>

#include "fuzz_case_builder.hpp"
#include "fuzz_outcome.hpp"
#include "fuzz_policies.hpp"
#include "lowbit/compare.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const lowbit::Case expected = lowbit::fuzz::CaseBuilder(in).build("golden-case.safetensors");
  const lowbit::FormatSpec* spec = lowbit::find_format(expected.format());
  if (!spec) return 0;  // conform refuses a case of an unregistered format (exit 2)
  const lowbit::TolerancePolicy& policy = lowbit::fuzz::fuzzed_policy(spec->default_tolerance, 0);
  lowbit::fuzz::clean_outcome("conform", [&] {
    lowbit::validate_case(*spec, expected, lowbit::CaseScope::Complete);  // a golden case holds every tensor
    const lowbit::Case actual = lowbit::run_reference(*spec, expected);
    const lowbit::ComparisonReport r = lowbit::compare_cases(expected, actual, policy);
    (void)lowbit::report_json(r).dump(2);
    (void)lowbit::report_markdown(r);
  });
  return 0;
}
