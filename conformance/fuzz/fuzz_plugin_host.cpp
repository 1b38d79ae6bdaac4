// libFuzzer target: the plugin host (plugin_host.hpp, kernel_sandbox.hpp) against a plugin whose
// table and kernels the input decides (plugins/fuzz_plugin.cpp): random tables (counts, names,
// formats, memory kinds, ABI versions, null pointers) and misbehaving kernels (statuses, unterminated
// messages, garbage outputs, exits, signals, sleeps, forks, floods of output, lies in the tensor
// structs, leaving or killing the group). The host must answer every input with a table or one
// PluginError, and every case with a verdict: a KernelRun completed with outputs of the declared
// sizes, or a failure that says why; never a crash, another exception or a hang. A kernel whose
// outputs are the expected ones and that otherwise behaves is conformant.
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_plugin_expected.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/plugin_host.hpp"
#include "lowbit/verify.hpp"

namespace {

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_plugin_host: %s\n", what.c_str());
  std::abort();
}

// A complete case of `format` on 256 float inputs, with its auxiliary inputs (a codebook's qmap).
const lowbit::Case& expected_case(const lowbit::FormatSpec& f) {
  static std::vector<std::pair<std::string, lowbit::Case>> made;
  for (const auto& [name, c] : made)
    if (name == f.name) return c;
  std::vector<float> x(256);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 37) * 0.37f - 5.0f;
  lowbit::Case in;
  in.add(lowbit::Tensor::from_f32("input", {256}, x));
  if (f.auxiliary_inputs)
    for (lowbit::Tensor& t : f.auxiliary_inputs(f.default_params)) in.add(std::move(t));
  in.metadata = {{"format", f.name}, {"params", "{}"}};
  in.origin = "fuzz_plugin_host";
  made.emplace_back(f.name, lowbit::run_reference(f, in));
  return made.back().second;
}

lowbit_fuzz::Expected expected_table;

void hand_to_plugin(const lowbit::Case& c) {
  expected_table.count = 0;
  for (const lowbit::Tensor& t : c.tensors())
    if (expected_table.count < 16) expected_table.tensors[expected_table.count++] = {t.name.c_str(), t.bytes.data(), t.bytes.size()};
  char address[32];
  std::snprintf(address, sizeof address, "%llx", static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(&expected_table)));
  setenv("LOWBIT_FUZZ_EXPECTED", address, 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > 512) return 0;
  std::string hex;
  for (std::size_t i = 0; i < size; ++i) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", data[i]);
    hex += two;
  }
  setenv("LOWBIT_FUZZ_PLUGIN", hex.c_str(), 1);
  const double timeout = data[0] % 4 == 0 ? 0.1 : 2.0;  // a sleeping kernel times out, or returns
  const std::string library = LOWBIT_FUZZ_PLUGIN_PATH;
  std::vector<lowbit::PluginKernel> kernels;
  try {
    kernels = lowbit::plugin_kernels(library, timeout);
  } catch (const lowbit::PluginError& e) {
    if (std::string(e.what()).size() <= library.size() + 2) finding("a PluginError that says nothing");
    return 0;
  }
  if (kernels.empty() || kernels.size() > 1024) finding("a table of " + std::to_string(kernels.size()) + " kernels");
  for (std::size_t i = 0; i < kernels.size() && i < 3; ++i) {
    const lowbit::PluginKernel& k = kernels[i];
    if (k.name.empty() || k.name.size() > 255 || k.format.empty()) finding("a kernel listed with a bad name or format");
    const lowbit::FormatSpec* f = lowbit::find_format(k.format);
    if (!f) f = lowbit::find_format("torchao.fp8");  // run_plugin_kernel passes tensors, whatever the format
    const lowbit::Case& expected = expected_case(*f);
    hand_to_plugin(expected);
    try {
      const lowbit::KernelUnderReview under{library, k.name, timeout, {}, std::uint64_t{256} << 20, {}};
      const lowbit::VerifiedCase v = lowbit::verify_case(under, *f, expected, lowbit::TolerancePolicy{}, "fuzz");
      if (!k.host && v.failure.empty()) finding("a CUDA kernel ran with no CUDA runner");
      if (v.failure.empty() && v.actual.tensors().size() != expected.tensors().size())
        finding("a completed run without every output");
      for (const lowbit::Tensor& t : v.actual.tensors())
        if (const lowbit::Tensor* e = expected.find(t.name); !e || e->bytes.size() != t.bytes.size() || e->shape != t.shape)
          finding("an output of another name, size or shape than declared: " + t.name);
    } catch (const lowbit::PluginError& e) {
      if (k.host && std::string(e.what()).find("takes CUDA memory") != std::string::npos) finding("a host kernel taken for CUDA");
    }
  }
  int status = 0;
  if (waitpid(-1, &status, WNOHANG) > 0) finding("a child left unreaped");
  return 0;
}
