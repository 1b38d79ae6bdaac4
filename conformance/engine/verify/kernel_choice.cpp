// Which kernel of a plugin a user means, and where a CUDA-memory kernel runs (kernel_choice.hpp).
#include "lowbit/kernel_choice.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>

#include "lowbit/formats.hpp"
#include "lowbit/kernel_sandbox.hpp"
#include "lowbit/printable.hpp"

namespace lowbit {

namespace {

constexpr const char* kAbove = "listed above";

std::string kernel_word(std::size_t n) { return n == 1 ? "1 kernel" : std::to_string(n) + " kernels"; }

void require_registered(const PluginKernel& k, const std::string& library) {
  if (!find_format(k.format))
    throw KernelChoiceError("kernel: " + library + ": kernel '" + printable(k.name) + "' implements format '" +
                                printable(k.format) + "', which is not registered",
                            true);
}

PluginKernel checked(const PluginKernel& k, const NamedPlugin& p, const std::string& format) {
  require_registered(k, p.library);
  if (!format.empty() && format != k.format)
    throw KernelChoiceError("format " + printable(format) + ": kernel '" + printable(k.name) + "' implements " +
                                printable(k.format),
                            true);
  return k;
}

const PluginKernel* named(const NamedPlugin& p) {
  for (const PluginKernel& k : p.kernels)
    if (k.name == p.name) return &k;
  throw KernelChoiceError("kernel: " + p.library + " has no kernel named '" + printable(p.name) +
                              "' (its kernels are " + kAbove + ")",
                          true, p.kernels);
}

NamedPlugin opened(std::string library, std::string name, double timeout, std::uint64_t memory) {
  if (!std::filesystem::is_regular_file(library))
    throw KernelChoiceError("kernel: '" + printable(library) + "' is not a file", true);
  try {
    library = open_plugin(library);  // from here the plugin is this open file, wherever the name points later
  } catch (const std::runtime_error& e) {
    throw KernelChoiceError(std::string("kernel: ") + e.what(), true);
  }
  std::vector<PluginKernel> kernels = plugin_kernels(library, timeout, memory);
  return {std::move(library), std::move(name), std::move(kernels)};
}

}  // namespace

KernelChoiceError::KernelChoiceError(const std::string& message, bool names_option, std::vector<PluginKernel> listed)
    : std::invalid_argument(message), names_option(names_option), listed(std::move(listed)) {}

std::string KernelChoiceError::below() const {
  std::string message = what();
  if (listed.empty()) return message;
  const auto at = message.find(kAbove);
  if (at != std::string::npos) message.replace(at, std::string(kAbove).size(), "listed below");
  std::string lines = listing_lines(listed);
  lines.pop_back();  // no newline after the last
  return message + ":\n" + lines;
}

std::string listing_lines(const std::vector<PluginKernel>& kernels) {
  std::string lines;
  for (const PluginKernel& k : kernels) lines += "  " + printable(k.name) + " (" + printable(k.format) + ")\n";
  return lines;
}

NamedPlugin open_named_plugin(const std::string& option, double timeout, std::uint64_t memory) {
  std::string library = option, name;
  const auto colon = option.rfind(':');
  if (colon != std::string::npos && !std::filesystem::exists(option)) {
    library = option.substr(0, colon);
    name = option.substr(colon + 1);
  }
  return opened(std::move(library), std::move(name), timeout, memory);
}

NamedPlugin open_plugin_kernel(const std::string& library, const std::string& name, double timeout, std::uint64_t memory) {
  return opened(library, name, timeout, memory);
}

PluginKernel choose_kernel(const NamedPlugin& p, const std::string& format) {
  if (!p.name.empty()) return checked(*named(p), p, format);
  if (p.kernels.size() == 1) return checked(p.kernels.front(), p, format);
  if (format.empty())
    throw KernelChoiceError("kernel: " + p.library + " holds " + kernel_word(p.kernels.size()) + " (" + kAbove +
                                "); name one as LIB:NAME",
                            true, p.kernels);
  std::vector<PluginKernel> of_format;
  for (const PluginKernel& k : p.kernels)
    if (k.format == format) of_format.push_back(k);
  if (of_format.size() == 1) return checked(of_format.front(), p, format);
  if (of_format.empty())
    throw KernelChoiceError("kernel: " + p.library + " holds no kernel of format " + printable(format) + " (its " +
                                kernel_word(p.kernels.size()) + " are " + kAbove + ")",
                            true, p.kernels);
  throw KernelChoiceError("kernel: " + p.library + " holds " + kernel_word(of_format.size()) + " of format " +
                              printable(format) + " (" + kAbove + "); name one as LIB:NAME",
                          true, of_format);
}

std::vector<PluginKernel> choose_kernels(const NamedPlugin& p) {
  if (!p.name.empty()) return {checked(*named(p), p, "")};
  for (const PluginKernel& k : p.kernels) require_registered(k, p.library);
  return p.kernels;
}

CudaPlace find_cuda_place(const PluginKernel& k, const std::string& library, const std::string& given,
                          const std::string& shipped, double timeout) {
  const std::string needs = "kernel '" + printable(k.name) + "' in '" + library + "' needs a CUDA device: ";
  CudaPlace place;
  const char* environment = std::getenv("LOWBIT_CUDA_RUNNER");
  if (!given.empty()) {
    place.runner = given;
  } else if (environment && *environment) {
    place.runner = environment;
  } else if (shipped.empty()) {
    throw KernelChoiceError(needs + "no CUDA runner library is given (liblowbit_cuda_runner.so of a lowbit built "
                                    "with CUDA; LOWBIT_CUDA_RUNNER may name one)",
                            false);
  } else {
    place.runner = shipped;
    if (!std::filesystem::exists(place.runner))
      throw KernelChoiceError(needs + "this lowbit was built without the CUDA runner (no " + place.runner +
                                  "; LOWBIT_CUDA_RUNNER may name one)",
                              false);
  }
  try {
    place.device = probe_cuda_device(place.runner, timeout);
  } catch (const CudaUnavailable& e) {
    throw KernelChoiceError(needs + e.what(), false);
  }
  return place;
}

std::string device_text(const CudaDevice& d) {
  return fmt::format("{} (compute capability {}.{}), driver {}, runtime {}", printable(d.name), d.major, d.minor,
                     cuda_version(d.driver), cuda_version(d.runtime));
}

}  // namespace lowbit
