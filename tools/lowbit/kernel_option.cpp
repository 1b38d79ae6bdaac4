// --kernel LIB[:NAME] for verify, golden generate and audit (kernel_option.hpp).
#include "kernel_option.hpp"

#include <fmt/core.h>

#include <cctype>
#include <cstdio>
#include <filesystem>

#include "command.hpp"
#include "lowbit/kernel_choice.hpp"
#include "lowbit/kernel_sandbox.hpp"
#include "lowbit/printable.hpp"
#include "shipped_data.hpp"

namespace lowbit::cli {

namespace {

// The engine's choice error as the CLI says it: the kernels it refers to on stderr, one a line, before
// the one-line error ("--kernel: ...", "--format F: ...", or the CUDA device's reason as it is).
[[noreturn]] void usage_error(const KernelChoiceError& e) {
  if (!e.listed.empty()) {
    std::fflush(stdout);
    std::fputs(listing_lines(e.listed).c_str(), stderr);
  }
  throw UsageError(e.names_option ? std::string("--") + e.what() : std::string(e.what()));
}

}  // namespace

PluginKernel pick_kernel(const std::string& option, const std::string& format, double timeout, std::string& library) {
  try {
    const NamedPlugin p = open_named_plugin(option, timeout);
    library = p.library;
    return choose_kernel(p, format);
  } catch (const KernelChoiceError& e) {
    usage_error(e);
  }
}

std::vector<PluginKernel> pick_kernels(const std::string& option, double timeout, std::string& library) {
  try {
    const NamedPlugin p = open_named_plugin(option, timeout);
    library = p.library;
    return choose_kernels(p);
  } catch (const KernelChoiceError& e) {
    usage_error(e);
  }
}

CudaDevice cuda_device_for(const PluginKernel& k, const std::string& library, double timeout, std::string& runner) {
  try {
    const CudaPlace place = find_cuda_place(k, library, "", shipped_cuda_runner().string(), timeout);
    runner = place.runner;
    return place.device;
  } catch (const KernelChoiceError& e) {
    usage_error(e);
  }
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
