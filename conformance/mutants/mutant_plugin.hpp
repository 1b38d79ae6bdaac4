#pragma once
// A mutant: the reference for one format with one known bug applied to its outputs. Each
// mutant_<bug>.cpp defines kFormat, kBug and mutate(); this header makes it a plugin.
#include "../plugins/plugin_case.hpp"

namespace mutant {
extern const char* const kFormat;
extern const char* const kBug;
void mutate(lowbit::Case& done, const nlohmann::json& params);
}  // namespace mutant

namespace {
int32_t run_mutant(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
                   uint64_t capacity) {
  const lowbit::FormatSpec* f = lowbit::find_format(mutant::kFormat);
  if (!f) return 1;
  return lowbit::plugin::run_over_reference(*f, in, n_in, params, out, n_out, error, capacity, mutant::mutate);
}
}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  static const lowbit_kernel kernels[] = {{mutant::kBug, mutant::kFormat, LOWBIT_MEMORY_HOST, run_mutant}};
  static const lowbit_plugin plugin = {LOWBIT_PLUGIN_ABI_VERSION, 1, kernels};
  return &plugin;
}
