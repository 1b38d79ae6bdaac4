// lowbit verify --kernel LIB[:NAME]: a kernel under review (a plugin, include/lowbit/kernel_plugin.h)
// against the reference on a battery of inputs and against the official golden cases of its format.
// The run and its reports are the engine's verify() (lowbit/verify.hpp); this verb parses the options,
// picks the kernel, its policy and its device, prints each case as it comes and writes the reports.
#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "command.hpp"
#include "number_option.hpp"
#include "lowbit/atomic_file.hpp"
#include "lowbit/plugin_host.hpp"
#include "lowbit/verify.hpp"
#include "kernel_option.hpp"
#include "param_option.hpp"
#include "report_output.hpp"
#include "shipped_data.hpp"
#include "subcommand.hpp"
#include "threads_option.hpp"

namespace lowbit::cli {

namespace {

struct VerifyArguments {
  std::string kernel;  // LIB[:NAME]
  std::string format;
  std::vector<std::string> inputs;
  std::vector<std::string> params;  // --param KEY=VALUE
  int steps = 3;
  std::string policy;
  double timeout = 60;
  std::string kernel_memory;  // --kernel-memory (its default set with the option)
  std::string golden = shipped_golden_dir().string();
  bool no_golden = false;
  bool f32_only = false;
  bool strict = false;
  std::string save_cases;
  int threads = 1;
  ReportOutput output;
};

int run_verify(VerifyArguments o) {
  o.output.prepare();
  check_kernel_timeout(o.timeout);
  const std::uint64_t memory = kernel_memory_bytes(o.kernel_memory);
  std::string library;
  const PluginKernel picked = pick_kernel(o.kernel, o.format, o.timeout, library);
  note_input_file(library);  // no report or saved case may be written over the plugin
  const FormatSpec& format = *find_format(picked.format);
  KernelUnderReview k{library, picked.name, o.timeout, {}, memory, {}};
  lowbit::VerifyOptions run;
  if (!picked.host) {  // a CUDA kernel's GPU, found before anything else is read or run
    run.device = cuda_device_for(picked, library, o.timeout, k.cuda_runner);
    fmt::print("device: {}\n", device_text(*run.device));
  }
  try {
    run.policy = load_tolerance_policy(o.policy.empty() ? format.default_tolerance : o.policy, shipped_policy_dir());
  } catch (const std::exception& e) {
    throw UsageError(std::string("--policy: ") + e.what());
  }
  run.policy.strict = o.strict;
  // The shipped golden folder may lack cases of a format; a folder the user names must be one.
  const bool golden_given = o.golden != shipped_golden_dir().string();
  if (golden_given && !o.no_golden && !std::filesystem::exists(std::filesystem::path(o.golden) / "MANIFEST.json"))
    throw UsageError("--golden: '" + o.golden + "' holds no MANIFEST.json");
  run.inputs = o.inputs;
  run.params = parse_params(o.params);
  run.steps = o.steps;
  run.golden = o.no_golden ? "" : o.golden;
  run.save_cases = o.save_cases;
  run.f32_only = o.f32_only;
  run.threads = o.threads;
  run.made_by = {std::string("lowbit ") + version(), std::string("lowbit verify ") + version()};
  VerifyEvents events;
  events.case_done = [](const VerifiedCase&, const std::string& line) {
    fmt::print("{}\n", line);
    std::fflush(stdout);
  };
  events.case_skipped = [](const std::string& line) { fmt::print("{}\n", line); };
  VerifyReport report;
  try {
    report = verify(k, format, run, events);
  } catch (const VerifyParamError& e) {
    throw UsageError("--param " + e.param + ": " + e.why);
  } catch (const VerifyInputError& e) {
    if (e.input.empty()) throw UsageError("nothing to verify: no --input, and no golden case of " + format.name);
    throw UsageError("--input '" + e.input + "': " + e.why);
  }
  fmt::print("{}\n", report.summary);
  o.output.write(report.json.dump(2) + "\n", report.markdown);
  return report.conformant ? kConformant : kNotConformant;
}

}  // namespace

Subcommand add_verify_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "verify",
      "Run a kernel under review (a plugin: include/lowbit/kernel_plugin.h) and the reference on the same\n"
      "inputs and compare their outputs bit for bit, then run the kernel on the official golden cases of its\n"
      "format. The kernel runs in a child process of its own process group, killed whole after each case, with\n"
      "a time, memory and CPU limit, its output shown prefixed 'kernel| ' on stderr (docs/verifying-a-kernel.md):\n"
      "a crash, a hang or an error status is reported as not conformant. Optimizer steps start each step from the reference's state. A kernel\n"
      "declaring CUDA memory runs on device 0 through the CUDA runner beside lowbit (or LOWBIT_CUDA_RUNNER);\n"
      "without one, or without a device, verify says so in one line (exit 2).\n"
      "Exit 0 conformant, 1 not, 2 bad input or an unusable plugin.");
  auto o = std::make_shared<VerifyArguments>();
  cmd->add_option("--kernel", o->kernel, "The plugin library, LIB or LIB:NAME when it holds several kernels (with --format,\n"
                  "LIB alone takes the one kernel implementing that format)")->required();
  cmd->add_option("--format", o->format, "The format it implements (checked against the plugin's table; picks the kernel\n"
                  "of LIB that implements it when --kernel names no kernel)");
  cmd->add_option("--input", o->inputs,
                  "Input spec, as golden generate takes them (repeatable); default: edges, special and random\n"
                  "distributions (optimizers: a parameter and moments drawn for --steps steps)");
  cmd->add_option("--param", o->params,
                  "Format parameter KEY=VALUE (repeatable), e.g. map=dynamic_unsigned block_size=256: every generated\n"
                  "case takes it, over the battery's own values (the golden cases keep theirs)");
  add_whole_option(*cmd, "--steps", o->steps, 1, 1000, "Optimizer formats: steps per input");
  cmd->add_option("--policy", o->policy, "Tolerance policy (default: the format's)");
  add_real_option(*cmd, "--timeout", o->timeout, kMinKernelTimeout, kMaxKernelTimeout, "Seconds the kernel may take per case before it is killed");
  add_kernel_memory_option(*cmd, o->kernel_memory);
  cmd->add_option("--golden", o->golden, "Golden folder whose cases of the format the kernel also runs")->capture_default_str();
  cmd->add_flag("--no-golden", o->no_golden, "Skip the golden cases");
  cmd->add_flag("--f32-only", o->f32_only,
                "The kernel takes float32 inputs only: skip the battery's bf16 and f16 inputs and the golden\n"
                "cases of a 16-bit input (each said)");
  cmd->add_flag("--strict", o->strict, "Every mismatch fails, also those the policy allows (recorded in the report)");
  cmd->add_option("--save-cases", o->save_cases,
                  "Folder for the expected and actual case of every case that does not conform (to attach to a\n"
                  "pull request, or to rerun with lowbit compare)");
  add_case_threads_option(*cmd, o->threads);
  o->output.add_options(*cmd);
  return {cmd, [o] { return run_verify(*o); }};
}

}  // namespace lowbit::cli
