// libFuzzer target for the case reader, the suite's security boundary. Any input must either parse
// or raise CaseError; a parsed case must serialize and parse back to the same tensors.
#include <cstdint>
#include <cstdlib>

#include "lowbit/case.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  lowbit::Case c;
  try {
    c = lowbit::parse_case({data, size}, "fuzz-input");
    (void)c.params();
  } catch (const lowbit::CaseError&) {
    return 0;
  }
  const lowbit::Case back = lowbit::parse_case(lowbit::serialize_case(c), "round-trip");
  if (back.tensors().size() != c.tensors().size() || back.metadata != c.metadata) std::abort();
  for (const lowbit::Tensor& t : c.tensors()) {
    const lowbit::Tensor* u = back.find(t.name);
    if (!u || u->bytes != t.bytes || u->shape != t.shape || u->dtype != t.dtype) std::abort();
  }
  return 0;
}
