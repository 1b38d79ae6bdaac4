// The reference as a kernel plugin: one kernel per registered format, "reference.<format>", running
// run_reference on the case the harness passes. verify must find it conformant on every battery
// and golden case (no false alarm); it is also the template of a C++ plugin over the ABI.
#include <array>
#include <utility>
#include <vector>

#include "plugin_case.hpp"

namespace {

// One run function per format: a table entry carries no context, so each is a template instance.
template <std::size_t I>
int32_t run_nth(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
                uint64_t capacity) {
  return lowbit::plugin::run_over_reference(lowbit::registered_formats()[I], in, n_in, params, out, n_out, error, capacity, {});
}

constexpr std::size_t kMaxFormats = 64;

template <std::size_t... I>
constexpr std::array<lowbit_run_fn, sizeof...(I)> run_table(std::index_sequence<I...>) {
  return {&run_nth<I>...};
}

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  static const auto runs = run_table(std::make_index_sequence<kMaxFormats>{});
  static std::vector<std::string> names;
  static std::vector<lowbit_kernel> kernels;
  static lowbit_plugin plugin{};
  if (kernels.empty()) {
    const auto& formats = lowbit::registered_formats();
    names.reserve(formats.size());
    for (std::size_t i = 0; i < formats.size() && i < kMaxFormats; ++i) {
      names.push_back("reference." + formats[i].name);
      kernels.push_back({names.back().c_str(), formats[i].name.c_str(), LOWBIT_MEMORY_HOST, runs[i]});
    }
    plugin = {LOWBIT_PLUGIN_ABI_VERSION, static_cast<uint32_t>(kernels.size()), kernels.data()};
  }
  return &plugin;
}
