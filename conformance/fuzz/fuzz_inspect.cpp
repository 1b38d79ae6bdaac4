// libFuzzer target: inspect's dequantized state (dequantized_state: the schema check, then the format's
// dequantizer) of a well-formed case of any registered format, with random shapes, dtypes, table sizes
// and params (fuzz_case_builder.hpp). A result or a clean refusal; a crash, a sanitizer report or an
// unchecked exception (fuzz_outcome.hpp) is a bug.
#include <cstdint>

#include "fuzz_case_builder.hpp"
#include "fuzz_outcome.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const lowbit::Case c = lowbit::fuzz::CaseBuilder(in).build("fuzz-case.safetensors");
  const lowbit::FormatSpec* spec = lowbit::find_format(c.format());
  if (!spec) return 0;  // inspect shows no dequantized state then
  lowbit::fuzz::clean_outcome("inspect", [&] { (void)lowbit::dequantized_state(*spec, c); });
  return 0;
}
