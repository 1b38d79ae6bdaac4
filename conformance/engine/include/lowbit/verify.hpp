#pragma once
// Verifying a kernel under review: the reference (or an official golden case) and the kernel on the
// same inputs, in a child process (plugin_host.hpp), compared bit for bit under a tolerance policy:
// verify_case for one case, verify() for the whole run that `lowbit verify` and lowbit.verify (Python)
// make: the battery or the given inputs, the golden cases of the format, the totals and the reports.
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowbit/case_maker.hpp"
#include "lowbit/compare.hpp"
#include "lowbit/diagnosis.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/plugin_host.hpp"

namespace lowbit {

// A kernel that runs in this process instead of in a plugin's sandboxed child (lowbit.verify on a Python
// callable): given the case's input tensors, its resolved params as JSON and the outputs it must make
// (the reference's names, dtypes and shapes), it returns their run: completed with `outputs` holding
// exactly those tensors, or a failure saying what went wrong ("raised ValueError: ...", "returned no
// tensor 'scale'"). It cannot be killed or limited: only code the caller trusts runs this way.
using InProcessKernel = std::function<KernelRun(const std::vector<const Tensor*>& inputs, const std::string& params_json,
                                                const std::vector<const Tensor*>& like)>;

struct KernelUnderReview {
  std::string library;  // path of the plugin's shared library (an in-process kernel: what reports name instead)
  std::string kernel;   // its name in the plugin's table
  double timeout_seconds = 60;
  std::string cuda_runner;  // a CUDA-memory kernel: the CUDA runner library (plugin_host.hpp); "" for host kernels
  std::uint64_t memory_bytes = 0;  // a host kernel's memory limit (kernel_sandbox.hpp); 0: the default
  InProcessKernel in_process;      // set: the kernel is this function, not a plugin's
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

// One run of verify, as the caller resolved it (the CLI's options, lowbit.verify's arguments).
struct VerifyOptions {
  std::vector<std::string> inputs;  // input specs (generators.hpp); empty: the default battery (default_input_runs)
  // Params every generated case takes over the format's defaults and the battery's own values
  // (`--param K=V`, lowbit.verify's param=): an object of the format's parameters. The golden cases keep theirs.
  nlohmann::json params = nlohmann::json::object();
  int steps = 3;                    // optimizer formats: steps per input
  TolerancePolicy policy;           // the policy, its `strict` set
  std::string golden;               // a golden folder whose cases of the format the kernel also runs; "": none.
                                    // A folder without MANIFEST.json is passed over (the caller refuses one named by the user)
  std::string save_cases;           // a folder for the expected and actual case of each non-conformant case; "": none
  int threads = 1;                  // the inputs' and the reference's threads: the same bytes for any count
  // The kernel takes float32 inputs only (our CUDA block-wise kernels and their host twins): the
  // battery's bf16 and f16 inputs and the golden cases of a 16-bit input are passed over, each said
  bool f32_only = false;
  MadeBy made_by;                   // the metadata of the cases made ("lowbit 0.1.0", "lowbit verify 0.1.0")
  std::optional<CudaDevice> device; // a CUDA kernel's GPU, for the reports
};

// What verify tells as it goes: each case once compared (with its line, verify_case_line) and each
// case or golden file passed over (the line says why), so that a front end prints them as they come.
struct VerifyEvents {
  std::function<void(const VerifiedCase& v, const std::string& line)> case_done;
  std::function<void(const std::string& line)> case_skipped;
};

// The whole run: every case in order, the skips, the totals and the three renderings.
struct VerifyReport {
  std::vector<VerifiedCase> cases;
  std::vector<std::string> skipped;  // the lines of VerifyEvents::case_skipped, in order
  std::size_t conformant_cases = 0;
  bool conformant = false;           // every case conformant
  // A kernel that fails: which known variant of the format's arithmetic reproduces its outputs on every
  // failing case, or that none does (diagnosis.hpp); empty (no line) when every case conforms.
  Diagnosis diagnosis;
  std::string summary;               // "verify: kernel K (LIB), format F, policy P: 3 of 3 cases conformant: conformant; ...",
                                     // and a non-conformant kernel's diagnosis line after "; "
  nlohmann::json json;               // `lowbit verify --report` (written as json.dump(2) and a newline)
  std::string markdown;              // `lowbit verify --markdown`
};

// An input verify cannot run: a bad input spec or one the format cannot take (`input` names it, `why`
// says why), or nothing at all to verify (no input and no golden case of the format: `input` empty).
struct VerifyInputError : std::invalid_argument {
  VerifyInputError(std::string input_spec, std::string reason);
  std::string input, why;
};

// A --param verify cannot take: a key the format does not have, a value of another type than its
// default's, or one the reference refuses. `param` is "KEY=VALUE" as given (all of them, joined with
// ", ", where only together they fail); what() is "KEY=VALUE: why".
struct VerifyParamError : std::invalid_argument {
  VerifyParamError(std::string given, std::string reason);
  std::string param, why;
};

// The params as a KEY=VALUE text: strings bare, other values as JSON ("map=dynamic_unsigned, block_size=64").
std::string param_items(const nlohmann::json& params);

// One case's line: "ok       edges: 2276 elements, 0 mismatches (0 allowed)", "FAILED   ...", or for a case
// that does not conform "MISMATCH edges: 2276 elements, 126 mismatches (0 allowed); classes: tie 126", the
// NaN-encoding differences (NaNs of another sign or payload) worded apart from the numeric mismatches.
std::string verify_case_line(const VerifiedCase& v);

// Runs kernel k of `format` on the inputs of o (the default battery, skipping inputs the format cannot
// take, or o.inputs) and on the golden cases of the format in o.golden (passing over those of another
// back end, CPU capability or 16-bit input, with the reason), compares each with the reference under
// o.policy, saves the non-conformant ones to o.save_cases, and reports. o.params are checked before any
// case runs (VerifyParamError). PluginError when the plugin is unusable; VerifyInputError as above; a
// golden folder that cannot be read throws as its reader does.
VerifyReport verify(const KernelUnderReview& k, const FormatSpec& format, const VerifyOptions& o,
                    const VerifyEvents& events = {});

}  // namespace lowbit
