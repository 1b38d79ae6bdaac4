// lowbit verify --kernel LIB[:NAME]: a kernel under review (a plugin, include/lowbit/kernel_plugin.h)
// against the reference on a battery of inputs and against the official golden cases of its format.
#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "command.hpp"
#include "number_option.hpp"
#include "lowbit/atomic_file.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/manifest.hpp"
#include "lowbit/plugin_host.hpp"
#include "lowbit/printable.hpp"
#include "lowbit/verify.hpp"
#include "kernel_option.hpp"
#include "report_output.hpp"
#include "shipped_data.hpp"
#include "subcommand.hpp"
#include "threads_option.hpp"

namespace lowbit::cli {

namespace {

struct VerifyOptions {
  std::string kernel;  // LIB[:NAME]
  std::string format;
  std::vector<std::string> inputs;
  int steps = 3;
  std::string policy;
  double timeout = 60;
  std::string kernel_memory;  // --kernel-memory (its default set with the option)
  std::string golden = shipped_golden_dir().string();
  bool no_golden = false;
  bool strict = false;
  std::string save_cases;
  int threads = 1;
  ReportOutput output;
};

bool is_16bit_float(DType d) { return d == DType::BF16 || d == DType::F16; }

std::string case_line(const VerifiedCase& v) {
  if (!v.failure.empty()) return fmt::format("FAILED   {}: the kernel {}", printable(v.label), printable(v.failure));
  ComparisonTotals n;
  n.add(v.report);
  std::string faults;
  for (const TensorComparison& t : v.report.tensors)
    if (!t.fault.empty()) faults += "; " + t.name + ": " + t.fault;
  // NaN encodings apart from the numeric mismatches; library rounding named wherever it occurs
  const std::uint64_t nan = n.count(MismatchClass::NanEncoding), library = n.count(MismatchClass::LibraryRounding);
  return fmt::format("{} {}: {} elements, {} mismatches ({} allowed){}{}{}{}", v.conformant() ? "ok      " : "MISMATCH",
                     printable(v.label), n.elements, n.mismatches - nan, n.allowed,
                     nan ? fmt::format(", {} NaN encodings", nan) : "",
                     library ? fmt::format(", {} library-rounding", library) : "", printable(faults),
                     v.kernel_ms ? fmt::format(", kernel {:.3f} ms", *v.kernel_ms) : "");
}

int run_verify(VerifyOptions o) {
  o.output.prepare();
  check_kernel_timeout(o.timeout);
  const std::uint64_t memory = kernel_memory_bytes(o.kernel_memory);
  std::string library;
  const PluginKernel picked = pick_kernel(o.kernel, o.format, o.timeout, library);
  note_input_file(library);  // no report or saved case may be written over the plugin
  const FormatSpec& format = *find_format(picked.format);
  KernelUnderReview k{library, picked.name, o.timeout, {}, memory};
  std::optional<CudaDevice> device;  // a CUDA kernel's GPU, found before anything else is read or run
  if (!picked.host) {
    device = cuda_device_for(picked, library, o.timeout, k.cuda_runner);
    fmt::print("device: {}\n", device_text(*device));
  }
  TolerancePolicy policy;
  try {
    policy = load_tolerance_policy(o.policy.empty() ? format.default_tolerance : o.policy, shipped_policy_dir());
  } catch (const std::exception& e) {
    throw UsageError(std::string("--policy: ") + e.what());
  }
  policy.strict = o.strict;
  // The shipped golden folder may lack cases of a format; a folder the user names must be one.
  const bool golden_given = o.golden != shipped_golden_dir().string();
  if (golden_given && !o.no_golden && !std::filesystem::exists(std::filesystem::path(o.golden) / "MANIFEST.json"))
    throw UsageError("--golden: '" + o.golden + "' holds no MANIFEST.json");
  // The default inputs are made for any format; one a format cannot take (COAT's activations want
  // 2-D tiles, torchao whole blocks) is skipped with its reason. An --input given is never skipped.
  const bool defaults = o.inputs.empty();
  std::vector<InputRun> runs;
  for (const std::string& text : o.inputs) runs.push_back({text, format.default_params});
  if (defaults && takes_input(format)) runs = default_input_runs(format);
  if (!o.save_cases.empty()) std::filesystem::create_directories(o.save_cases);

  std::vector<VerifiedCase> results;
  auto record = [&](VerifiedCase v) {
    fmt::print("{}\n", case_line(v));
    std::fflush(stdout);
    if (!o.save_cases.empty() && !v.conformant()) {
      const std::string stem = (std::filesystem::path(o.save_cases) / file_name_safe(v.label)).string();
      write_case(stem + ".expected.safetensors", v.expected);
      write_case(stem + ".actual.safetensors", v.actual);
    }
    results.push_back(std::move(v));
  };
  const MadeBy made_by{std::string("lowbit ") + version(), std::string("lowbit verify ") + version()};
  const nlohmann::json params = format.default_params;
  if (!takes_input(format)) {
    CaseToRun c = table_case(format, params, made_by);
    record(verify_case(k, format, run_reference(format, c.inputs, o.threads), policy, c.stem));
  }
  for (const InputRun& run : runs) {
    try {
      for_each_reference_case(
          format, run, o.steps, made_by, defaults,
          [&](const std::string& stem, const Case& expected) { record(verify_case(k, format, expected, policy, stem)); },
          [&](const std::string& stem, const std::string& why) {
            fmt::print("skipped  {}: {}\n", printable(stem), printable(why));
          },
          o.threads);
    } catch (const PluginError&) {
      throw;
    } catch (const std::exception& e) {  // a bad spec, or an input the format cannot take, named as the user gave it
      throw UsageError("--input '" + run.spec + "': " + e.what());
    }
  }
  if (!o.no_golden && std::filesystem::exists(std::filesystem::path(o.golden) / "MANIFEST.json")) {
    const FolderLock reading(o.golden, FolderLock::Mode::shared);  // no --replace rewrites a case under us
    const Manifest manifest = read_golden_manifest(o.golden);
    for (const ManifestEntry* e : select_entries(manifest, format.name)) {
      Case golden = read_verified_case(o.golden, *e);
      // A case of another back end of the format (bnb.blockwise8's `backend`, the one parameter that
      // picks an implementation) is that implementation's, not this kernel's: verify holds a kernel
      // to the format's default back end, as its generated inputs are.
      // Likewise a case of another torch CPU capability (`cpu_capability`: the machine the library ran
      // on, not an arithmetic a kernel chooses), and a 16-bit `input` (bnb.blockwise8's bf16 and f16
      // cases: verify's own inputs are float32; conform checks the reference on them).
      const nlohmann::json given = golden.params();
      bool skipped = false;
      for (const char* key : {"backend", "cpu_capability"})
        if (!skipped && given.contains(key) && format.default_params.contains(key) &&
            given.at(key) != format.default_params.at(key)) {
          fmt::print("skipped  golden {}: {} {} (verify checks the default, {})\n", printable(e->path), key,
                     printable(given.at(key).dump()), printable(format.default_params.at(key).dump()));
          skipped = true;
        }
      if (const Tensor* input = golden.find("input"); !skipped && input && is_16bit_float(input->dtype)) {
        fmt::print("skipped  golden {}: input {} (verify's inputs are F32)\n", printable(e->path), dtype_name(input->dtype));
        skipped = true;
      }
      if (skipped) continue;
      record(verify_case(k, format, golden, policy, "golden " + e->path));
    }
  }
  if (results.empty()) throw UsageError("nothing to verify: no --input, and no golden case of " + format.name);

  std::size_t conformant = 0;
  nlohmann::json cases = nlohmann::json::array();
  std::string details;
  ComparisonTotals totals;
  for (const VerifiedCase& v : results) {
    conformant += v.conformant();
    if (v.failure.empty()) totals.add(v.report);
    nlohmann::json j = {{"label", v.label}, {"conformant", v.conformant()}};
    if (!v.failure.empty()) j["failure"] = v.failure;
    else j["comparison"] = report_json(v.report);
    if (v.kernel_ms) j["kernel_ms"] = *v.kernel_ms;
    cases.push_back(j);
    if (!v.conformant())
      details += "\n### " + markdown_code(v.label) + "\n\n" +
                 (v.failure.empty() ? report_markdown(v.report) : "The kernel " + markdown_text(v.failure) + ".\n");
  }
  const bool all = conformant == results.size();
  const std::string library_rounding = library_rounding_text(totals, policy);
  fmt::print("verify: kernel {} ({}), format {}, policy {}{}: {} of {} cases conformant: {}; {}\n", printable(k.kernel),
             printable(library), format.name, policy.name, policy.strict ? " (strict)" : "", conformant, results.size(),
             all ? "conformant" : "NOT conformant", library_rounding);
  nlohmann::json report = {{"kernel", k.kernel},
                           {"library", library},
                           {"format", format.name},
                           {"policy", policy.name},
                           {"strict", policy.strict},
                           {"conformant", all},
                           {"library_rounding", library_rounding_json(totals, policy)},
                           {"cases", cases}};
  std::string device_md;
  if (device) {
    report["device"] = {{"name", device->name},
                        {"compute_capability", std::to_string(device->major) + "." + std::to_string(device->minor)},
                        {"driver_version", cuda_version(device->driver)},
                        {"runtime_version", cuda_version(device->runtime)}};
    device_md = fmt::format("\nDevice: {} (compute capability {}.{}), CUDA driver {}, runtime {}.\n\n"
                            "| case | kernel time (ms, CUDA events) |\n|---|---|\n",
                            markdown_code(device->name), device->major, device->minor, cuda_version(device->driver),
                            cuda_version(device->runtime));
    for (const VerifiedCase& v : results)
      device_md += "| " + markdown_code(v.label) + " | " + (v.kernel_ms ? fmt::format("{:.3f}", *v.kernel_ms) : "n/a") + " |\n";
  }
  const std::string md = fmt::format("# lowbit verify: kernel {}, format {}: {}\n\n{} of {} cases conformant under policy {}{}; "
                                     "{}.\n{}{}",
                                     markdown_code(k.kernel), format.name, all ? "conformant" : "NOT conformant", conformant,
                                     results.size(), markdown_text(policy.name),
                                     policy.strict ? " (strict: every mismatch fails)" : "", library_rounding, device_md,
                                     details);
  o.output.write(report.dump(2) + "\n", md);
  return all ? kConformant : kNotConformant;
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
  auto o = std::make_shared<VerifyOptions>();
  cmd->add_option("--kernel", o->kernel, "The plugin library, LIB or LIB:NAME when it holds several kernels")->required();
  cmd->add_option("--format", o->format, "The format it implements (checked against the plugin's table)");
  cmd->add_option("--input", o->inputs,
                  "Input spec, as golden generate takes them (repeatable); default: edges, special and random\n"
                  "distributions (optimizers: a parameter and moments drawn for --steps steps)");
  add_whole_option(*cmd, "--steps", o->steps, 1, 1000, "Optimizer formats: steps per input");
  cmd->add_option("--policy", o->policy, "Tolerance policy (default: the format's)");
  add_real_option(*cmd, "--timeout", o->timeout, kMinKernelTimeout, kMaxKernelTimeout, "Seconds the kernel may take per case before it is killed");
  add_kernel_memory_option(*cmd, o->kernel_memory);
  cmd->add_option("--golden", o->golden, "Golden folder whose cases of the format the kernel also runs")->capture_default_str();
  cmd->add_flag("--no-golden", o->no_golden, "Skip the golden cases");
  cmd->add_flag("--strict", o->strict, "Every mismatch fails, also those the policy allows (recorded in the report)");
  cmd->add_option("--save-cases", o->save_cases,
                  "Folder for the expected and actual case of every case that does not conform (to attach to a\n"
                  "pull request, or to rerun with lowbit compare)");
  add_case_threads_option(*cmd, o->threads);
  o->output.add_options(*cmd);
  return {cmd, [o] { return run_verify(*o); }};
}

}  // namespace lowbit::cli
