#pragma once
// The host side of the kernel plugin ABI (include/lowbit/kernel_plugin.h): loads a plugin
// library and runs one of its kernels on a case, always in a sandboxed child process (kernel_sandbox.hpp:
// its own process group, killed whole; a time, memory and CPU limit; its output captured), so that a
// plugin that crashes, hangs, forks or corrupts memory on load or on a case is reported, never takes
// lowbit down. The child writes the kernel's outputs into memory shared with the parent, which reads
// them once the child's whole group is dead. The library a path names is opened once per process
// (open_plugin): the file loaded is the file hashed, never one found on the library path.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowbit/case.hpp"

namespace lowbit {

// A plugin that cannot be used at all (no library, no lowbit_plugin_v1, another ABI version, a
// malformed table, no kernel of that name): bad input, exit 2.
struct PluginError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct PluginKernel {
  std::string name, format;
  bool host = true;  // false: the kernel's tensors live in CUDA memory (run through the CUDA runner)
};

// The kernels a plugin library exports, read and checked in a child process. PluginError naming the
// library and the fault.
// memory_bytes: the child's memory limit (0: default_kernel_memory()).
std::vector<PluginKernel> plugin_kernels(const std::string& library, double timeout_seconds, std::uint64_t memory_bytes = 0);

// The GPU a CUDA kernel runs on (device 0), as the CUDA runner (include/lowbit/cuda_runner.h)
// describes it.
struct CudaDevice {
  std::string name;
  int major = 0, minor = 0;          // compute capability
  int driver = 0, runtime = 0;       // CUDA versions, 1000 * major + 10 * minor
};

std::string cuda_version(int v);  // CUDA's 1000 * major + 10 * minor as "13.0"

// No CUDA kernel can run here: the runner library cannot be loaded, or it finds no usable device.
// what() is the reason alone ("cudaGetDeviceCount: no CUDA-capable device is detected").
struct CudaUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Loads the CUDA runner library `runner` and asks it for device 0, in a child process (the parent never
// initializes CUDA, so that every case's child starts clean). CudaUnavailable when it cannot.
CudaDevice probe_cuda_device(const std::string& runner, double timeout_seconds);

// What became of one run of a kernel on a case.
struct KernelRun {
  bool completed = false;  // the kernel returned 0; outputs holds what it wrote
  std::string failure;     // otherwise: "returned 3: <its message>", "killed by signal 11 (SIGSEGV)", "timed out after 10 s"
  Case outputs;            // shaped like the `like` tensors, named as them
  std::optional<double> kernel_ms;  // CUDA kernels: the time between the runner's two CUDA events
};

// Runs kernel `kernel` of `library` on the input tensors of `inputs` with `params_json`, its outputs
// allocated (zero-filled) with the names, dtypes and shapes of `like` (the reference's outputs). A CUDA
// kernel runs through `cuda_runner` (the runner library's path; PluginError when none is given).
// memory_bytes: a host kernel's memory limit (0: default_kernel_memory()).
KernelRun run_plugin_kernel(const std::string& library, const std::string& kernel, const std::vector<const Tensor*>& inputs,
                            const std::string& params_json, const std::vector<const Tensor*>& like, double timeout_seconds,
                            const std::string& cuda_runner = {}, std::uint64_t memory_bytes = 0);

}  // namespace lowbit
