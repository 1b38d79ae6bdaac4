#pragma once
// --kernel LIB[:NAME], as verify, golden generate and audit take it: the plugin's kernel picked from
// its table, and for a CUDA-memory kernel the CUDA runner and device 0, found before any work. Every
// way that fails is one line (UsageError, exit 2).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lowbit/kernel_cases.hpp"
#include "lowbit/kernel_choice.hpp"

namespace lowbit::cli {

// --timeout: a finite number of seconds from a millisecond to a day, read by the one number parser
// (number_option.hpp: nan, inf, 0 and negative times would leave a kernel unbounded or refuse every
// case); check_kernel_timeout checks the value again, UsageError naming the option.
inline constexpr double kMinKernelTimeout = 1e-3, kMaxKernelTimeout = 86400;
void check_kernel_timeout(double seconds);

// --kernel-memory (kernel_sandbox.hpp): bytes as a whole number with an optional binary unit K, M, G
// or T ("512M", "8G"), from 16M to 1T; UsageError naming the option. The option's default text is
// default_kernel_memory() in M.
std::uint64_t kernel_memory_bytes(const std::string& text);
CLI::Option* add_kernel_memory_option(CLI::App& app, std::string& text);

// LIB or LIB:NAME, chosen by the engine's rules (kernel_choice.hpp: LIB alone when the plugin holds one
// kernel, or with --format the one kernel implementing it): the library's canonical absolute path into
// `library` (the file opened, hashed and loaded, kernel_sandbox.hpp) and the kernel.
PluginKernel pick_kernel(const std::string& option, const std::string& format, double timeout, std::string& library);

// Every kernel of LIB, or the one LIB:NAME names (choose_kernels): audit takes a kernel per format.
std::vector<PluginKernel> pick_kernels(const std::string& option, double timeout, std::string& library);

// A CUDA-memory kernel (find_cuda_place): the runner library (LOWBIT_CUDA_RUNNER, else the one beside
// lowbit) into `runner`, and device 0.
CudaDevice cuda_device_for(const PluginKernel& k, const std::string& library, double timeout, std::string& runner);

// The plugin library's file as provenance names it: "NAME (sha256 HEX)", the hash of the open file
// every kernel run loads.
std::string library_identity(const std::string& library);

}  // namespace lowbit::cli
