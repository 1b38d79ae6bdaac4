#pragma once
// Which kernel of a plugin library a user means, and where a CUDA-memory kernel runs: the one set of
// rules `lowbit verify`, `golden generate`, `audit` (--kernel LIB[:NAME]) and lowbit.verify (Python)
// share, so that each front end only parses its arguments and prints.
#include <stdexcept>
#include <string>
#include <vector>

#include "lowbit/plugin_host.hpp"

namespace lowbit {

// A kernel that cannot be chosen: bad input (exit 2 in the CLI, ValueError in Python). what() is one
// line in the Python wording ("kernel: LIB holds no kernel named 'x' (its kernels are listed above)",
// "format F: kernel 'K' implements G", "kernel 'K' in 'LIB' needs a CUDA device: ..."); the CLI puts
// "--" before it when names_option (it then starts with the option's name). `listed`: the kernels the
// message refers to, which a terminal prints above it, one a line (listing_lines); below() is the
// message with them after it, for a front end that raises one exception.
struct KernelChoiceError : std::invalid_argument {
  KernelChoiceError(const std::string& message, bool names_option, std::vector<PluginKernel> listed = {});
  bool names_option;
  std::vector<PluginKernel> listed;
  std::string below() const;
};

// "  NAME (FORMAT)\n" for each kernel, printable (a plugin may hold 1 024 names of 255 bytes).
std::string listing_lines(const std::vector<PluginKernel>& kernels);

// The plugin a user names: its library (opened: the canonical path of the open file that is hashed
// and loaded, kernel_sandbox.hpp) and its kernels, read in a child process. `option` is LIB or
// LIB:NAME (LIB alone when the whole text is an existing file). KernelChoiceError when LIB is not a
// file; PluginError when its table cannot be read.
struct NamedPlugin {
  std::string library;
  std::string name;  // NAME of LIB:NAME, or the name given apart; "" when none
  std::vector<PluginKernel> kernels;
};
NamedPlugin open_named_plugin(const std::string& option, double timeout_seconds, std::uint64_t memory_bytes = 0);
// The same with the name given apart (lowbit.verify's name=): `library` is the path as given.
NamedPlugin open_plugin_kernel(const std::string& library, const std::string& name, double timeout_seconds,
                               std::uint64_t memory_bytes = 0);

// The one kernel meant, its format registered:
//  - a name: that kernel (and, when `format` is given, it must implement it);
//  - no name, the plugin holds one kernel: that kernel (the same check);
//  - no name, a format: the one kernel implementing it (none or several: KernelChoiceError listing them);
//  - no name, no format, several kernels: KernelChoiceError listing them ("name one as LIB:NAME").
PluginKernel choose_kernel(const NamedPlugin& p, const std::string& format);

// Every kernel of the plugin, or the one named (each format registered): audit takes a kernel a format.
std::vector<PluginKernel> choose_kernels(const NamedPlugin& p);

// Where a CUDA-memory kernel runs: the CUDA runner library (the `given` path, else $LOWBIT_CUDA_RUNNER,
// else `shipped`, the one installed beside the front end, "" for none) and its device 0, probed in a
// child before any case is made. KernelChoiceError naming the kernel and why no device can run it.
struct CudaPlace {
  std::string runner;
  CudaDevice device;
};
CudaPlace find_cuda_place(const PluginKernel& k, const std::string& library, const std::string& given,
                          const std::string& shipped, double timeout_seconds);

std::string device_text(const CudaDevice& d);  // "NAME (compute capability 9.0), driver 13.0, runtime 13.0"

}  // namespace lowbit
