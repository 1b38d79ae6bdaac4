#pragma once
// Verifying a kernel under review: the reference (or an official golden case) and the kernel on the
// same inputs, in a child process (plugin_host.hpp), compared bit for bit under a tolerance policy.
// `lowbit verify` is this over a battery of inputs; the tests use it directly.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lowbit/compare.hpp"
#include "lowbit/formats.hpp"

namespace lowbit {

struct KernelUnderReview {
  std::string library;  // path of the plugin's shared library
  std::string kernel;   // its name in the plugin's table
  double timeout_seconds = 60;
  std::string cuda_runner;  // a CUDA-memory kernel: the CUDA runner library (plugin_host.hpp); "" for host kernels
  std::uint64_t memory_bytes = 0;  // a host kernel's memory limit (kernel_sandbox.hpp); 0: the default
};

struct VerifiedCase {
  std::string label;        // what made the case: an input spec and step, or a golden file
  Case expected;            // inputs and the expected outputs
  Case actual;              // the same inputs and the kernel's outputs (no outputs when it failed)
  std::string failure;      // the kernel crashed, hung or returned an error: "killed by signal 11 (SIGSEGV)"
  ComparisonReport report;  // the comparison, when the kernel completed
  std::optional<double> kernel_ms;  // a CUDA kernel that completed: its time between CUDA events
  bool conformant() const { return failure.empty() && report.conformant; }
};

// Runs the kernel on the inputs of `expected` (a complete case of `format`: the reference's, or a
// golden one) and compares its outputs with the expected ones. PluginError when the plugin is unusable.
VerifiedCase verify_case(const KernelUnderReview& k, const FormatSpec& format, const Case& expected,
                         const TolerancePolicy& policy, std::string label);

}  // namespace lowbit
