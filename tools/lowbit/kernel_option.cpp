// --kernel LIB[:NAME] for verify, golden generate and audit (kernel_option.hpp).
#include "kernel_option.hpp"

#include <fmt/core.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "command.hpp"
#include "lowbit/case.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/kernel_sandbox.hpp"
#include "lowbit/printable.hpp"
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
  if (!std::filesystem::is_regular_file(library)) throw UsageError("--kernel: '" + printable(library) + "' is not a file");
  try {
    library = open_plugin(library);  // from here the plugin is this open file, wherever the name points later
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("--kernel: ") + e.what());
  }
  return plugin_kernels(library, timeout);
}

// A plugin's kernels on stderr, one a line ("  NAME (FORMAT)"; a plugin may hold 1 024 of 255-byte
// names), before the one-line error that refers to them.
void list_kernels(const std::vector<PluginKernel>& kernels) {
  std::string lines;
  for (const PluginKernel& k : kernels) lines += "  " + printable(k.name) + " (" + printable(k.format) + ")\n";
  std::fflush(stdout);
  std::fputs(lines.c_str(), stderr);
}

void require_registered(const PluginKernel& k, const std::string& library) {
  if (!find_format(k.format))
    throw UsageError("--kernel: " + library + ": kernel '" + printable(k.name) + "' implements format '" + printable(k.format) +
                     "', which is not registered");
}

}  // namespace

PluginKernel pick_kernel(const std::string& option, const std::string& format, double timeout, std::string& library) {
  std::string name;
  const std::vector<PluginKernel> kernels = table_of(option, timeout, library, name);
  if (name.empty() && kernels.size() > 1) {
    list_kernels(kernels);
    throw UsageError("--kernel: " + library + " holds " + std::to_string(kernels.size()) +
                     " kernels (listed above); name one as LIB:NAME");
  }
  for (const PluginKernel& k : kernels)
    if (name.empty() || k.name == name) {
      require_registered(k, library);
      if (!format.empty() && format != k.format)
        throw UsageError("--format " + format + ": kernel '" + k.name + "' implements " + k.format);
      return k;
    }
  list_kernels(kernels);
  throw UsageError("--kernel: " + library + " has no kernel named '" + printable(name) + "' (its kernels are listed above)");
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
  if (picked.empty()) {
    list_kernels(kernels);
    throw UsageError("--kernel: " + library + " has no kernel named '" + printable(name) + "' (its kernels are listed above)");
  }
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

std::string device_text(const CudaDevice& d) {
  return fmt::format("{} (compute capability {}.{}), driver {}, runtime {}", printable(d.name), d.major, d.minor,
                     cuda_version(d.driver), cuda_version(d.runtime));
}

std::string library_identity(const std::string& library) {
  return std::filesystem::path(library).filename().string() + " (sha256 " + plugin_sha256(library) + ")";
}

void check_kernel_timeout(double seconds) {
  if (!(seconds >= kMinKernelTimeout && seconds <= kMaxKernelTimeout))  // also false for NaN
    throw UsageError(fmt::format("--timeout must be a finite number in {}..{} (got {})", kMinKernelTimeout, kMaxKernelTimeout, seconds));
}

std::uint64_t kernel_memory_bytes(const std::string& text) {
  const std::string why = "--kernel-memory must be a whole number of bytes with an optional unit K, M, G or T (1024-based), "
                          "from 16M to 1T, not '" + printable(text) + "'";
  std::size_t digits = 0;
  while (digits < text.size() && digits < 16 && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || text.size() - digits > 1 || (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))))
    throw UsageError(why);
  std::uint64_t value = std::stoull(text.substr(0, digits));
  int shift = 0;
  if (digits < text.size()) {
    const std::string units = "KMGT";
    const auto unit = units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(text[digits]))));
    if (unit == std::string::npos) throw UsageError(why);
    shift = 10 * static_cast<int>(unit + 1);
  }
  if (value > (std::uint64_t{1} << 40) >> shift) throw UsageError(why);
  value <<= shift;
  if (value < (std::uint64_t{16} << 20)) throw UsageError(why);
  return value;
}

CLI::Option* add_kernel_memory_option(CLI::App& app, std::string& text) {
  text = std::to_string(default_kernel_memory() >> 20) + "M";
  return app.add_option("--kernel-memory", text,
                        "--kernel: memory a host kernel may map beyond what lowbit holds when it runs, e.g. 512M or 8G "
                        "(1024-based); over it its allocations fail and its case says so. Default: 8G, or half of this "
                        "machine's memory when less")
      ->capture_default_str();
}

}  // namespace lowbit::cli
