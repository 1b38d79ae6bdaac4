// --kernel LIB[:NAME] for verify, golden generate and audit (kernel_option.hpp).
#include "kernel_option.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>

#include "command.hpp"
#include "lowbit/case.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/printable.hpp"
#include "lowbit/sha256.hpp"
#include "shipped_data.hpp"

namespace lowbit::cli {

namespace {

// LIB[:NAME] split, LIB checked to be a file; the plugin's table, read in a child process.
std::vector<PluginKernel> table_of(const std::string& option, double timeout, std::string& library, std::string& name) {
  library = option;
  name.clear();
  const auto colon = option.rfind(':');
  if (colon != std::string::npos && !std::filesystem::exists(option)) {
    library = option.substr(0, colon);
    name = option.substr(colon + 1);
  }
  if (!std::filesystem::is_regular_file(library)) throw UsageError("--kernel: '" + library + "' is not a file");
  return plugin_kernels(library, timeout);
}

std::string names_of(const std::vector<PluginKernel>& kernels) {
  std::string names;
  for (const PluginKernel& k : kernels) names += (names.empty() ? "" : ", ") + k.name + " (" + k.format + ")";
  return names;
}

void require_registered(const PluginKernel& k, const std::string& library) {
  if (!find_format(k.format))
    throw UsageError("--kernel: " + library + ": kernel '" + k.name + "' implements format '" + k.format +
                     "', which is not registered");
}

}  // namespace

PluginKernel pick_kernel(const std::string& option, const std::string& format, double timeout, std::string& library) {
  std::string name;
  const std::vector<PluginKernel> kernels = table_of(option, timeout, library, name);
  if (name.empty() && kernels.size() > 1)
    throw UsageError("--kernel: " + library + " holds " + std::to_string(kernels.size()) + " kernels (" +
                     names_of(kernels) + "); name one as LIB:NAME");
  for (const PluginKernel& k : kernels)
    if (name.empty() || k.name == name) {
      require_registered(k, library);
      if (!format.empty() && format != k.format)
        throw UsageError("--format " + format + ": kernel '" + k.name + "' implements " + k.format);
      return k;
    }
  throw UsageError("--kernel: " + library + " has no kernel named '" + name + "' (it has " + names_of(kernels) + ")");
}

std::vector<PluginKernel> pick_kernels(const std::string& option, double timeout, std::string& library) {
  std::string name;
  const std::vector<PluginKernel> kernels = table_of(option, timeout, library, name);
  std::vector<PluginKernel> picked;
  for (const PluginKernel& k : kernels)
    if (name.empty() || k.name == name) {
      require_registered(k, library);
      picked.push_back(k);
    }
  if (picked.empty())
    throw UsageError("--kernel: " + library + " has no kernel named '" + name + "' (it has " + names_of(kernels) + ")");
  return picked;
}

CudaDevice cuda_device_for(const PluginKernel& k, const std::string& library, double timeout, std::string& runner) {
  const std::string needs = "kernel '" + k.name + "' in '" + library + "' needs a CUDA device: ";
  const char* given = std::getenv("LOWBIT_CUDA_RUNNER");
  if (given && *given) {
    runner = given;
  } else {
    runner = shipped_cuda_runner().string();
    if (!std::filesystem::exists(runner))
      throw UsageError(needs + "this lowbit was built without the CUDA runner (no " + runner +
                       "; LOWBIT_CUDA_RUNNER may name one)");
  }
  try {
    return probe_cuda_device(runner, timeout);
  } catch (const CudaUnavailable& e) {
    throw UsageError(needs + e.what());
  }
}

std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

std::string device_text(const CudaDevice& d) {
  return fmt::format("{} (compute capability {}.{}), driver {}, runtime {}", printable(d.name), d.major, d.minor,
                     cuda_version(d.driver), cuda_version(d.runtime));
}

std::string library_identity(const std::string& library) {
  return std::filesystem::path(library).filename().string() + " (sha256 " + sha256_hex(read_file_bytes(library)) + ")";
}

std::string refusal_lines(const std::string& stem, const std::string& kernel, const KernelCase& kc) {
  const std::string head = "REFUSED  " + printable(stem) + ": kernel " + printable(kernel);
  if (!kc.failure.empty()) return head + " " + printable(kc.failure) + "\n";
  std::string out;
  for (const SampleCheck& c : kc.checks) {
    if (c.report.conformant) continue;
    for (const TensorComparison& t : c.report.tensors) {
      if (t.mismatches == 0 && t.fault.empty()) continue;
      std::string classes;
      for (MismatchClass m : kMismatchClasses)
        if (const auto count = t.by_class[static_cast<std::size_t>(m)])
          classes += fmt::format("{}{} {}", classes.empty() ? "" : ", ", count, mismatch_class_name(m));
      out += head + fmt::format(", {}: '{}' ", c.label, printable(t.name)) +
             (t.fault.empty() ? fmt::format("{} of {} elements differ from the reference ({})", t.mismatches, t.elements, classes)
                              : printable(t.fault)) +
             "\n";
    }
  }
  return out;
}

}  // namespace lowbit::cli
