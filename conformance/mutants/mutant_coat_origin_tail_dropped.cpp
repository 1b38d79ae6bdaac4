// Bug class: COAT's no-expansion launch over n / 128 groups, rounded down: a partial last group's codes
// and scale are never written (they stay the harness's zeros), though its parameters are updated. Only
// a length that is not a multiple of 128 shows it.
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.optim.origin.e4m3";
const char* const kBug = "tail-group-not-written";

void mutate(lowbit::Case& done, const nlohmann::json&) {
  for (const std::string moment : {"exp_avg", "exp_avg_sq"}) {
    lowbit::Tensor& codes = *done.find(moment + ".codes.next");  // run_over_reference made every output
    const std::size_t n = codes.bytes.size(), written = n / 128 * 128;  // the bug: whole groups only
    for (std::size_t i = written; i < n; ++i) codes.bytes[i] = 0;
    lowbit::Tensor& scale = *done.find(moment + ".scale.next");
    const std::size_t groups = written / 128;
    for (std::size_t b = groups * 4; b < scale.bytes.size(); ++b) scale.bytes[b] = 0;
  }
}
}  // namespace mutant
