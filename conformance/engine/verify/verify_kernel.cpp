// verify(): a kernel under review over the battery (or the given inputs) and the golden cases of its
// format, the totals and the reports (verify.hpp), for `lowbit verify` and lowbit.verify alike.
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>

#include "lowbit/atomic_file.hpp"
#include "lowbit/manifest.hpp"
#include "lowbit/printable.hpp"
#include "lowbit/verify.hpp"

namespace lowbit {

namespace {

// Why verify passes over a golden case, or "" when the kernel runs it. A case of another back end of
// the format (bnb.blockwise8's `backend`, the one parameter that picks an implementation) is that
// implementation's, not this kernel's: verify holds a kernel to the format's default back end, as its
// generated inputs are. Likewise a case of another torch CPU capability (`cpu_capability`: the machine
// the library ran on, not an arithmetic a kernel chooses). A 16-bit `input` (bnb.blockwise8's bf16 and
// f16 cases) is run: the battery holds the kernel to its 16-bit path too.
std::string golden_skip(const FormatSpec& format, const Case& golden, const std::string& path, bool f32_only) {
  const nlohmann::json given = golden.params();
  if (const Tensor* input = golden.find("input"); f32_only && input && input->dtype != DType::F32)
    return fmt::format("skipped  golden {}: input {} (the kernel takes F32 only: --f32-only)", printable(path),
                       dtype_name(input->dtype));
  for (const char* key : {"backend", "cpu_capability"})
    if (given.contains(key) && format.default_params.contains(key) && given.at(key) != format.default_params.at(key))
      return fmt::format("skipped  golden {}: {} {} (verify checks the default, {})", printable(path), key,
                         printable(given.at(key).dump()), printable(format.default_params.at(key).dump()));
  return {};
}

// The totals, the verdict line and the JSON and Markdown reports of a finished run.
void finish_report(const KernelUnderReview& k, const FormatSpec& format, const VerifyOptions& o, VerifyReport& r) {
  const TolerancePolicy& policy = o.policy;
  nlohmann::json cases = nlohmann::json::array();
  std::string details;
  ComparisonTotals totals;
  for (const VerifiedCase& v : r.cases) {
    r.conformant_cases += v.conformant();
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
  r.conformant = r.conformant_cases == r.cases.size();
  // a failing kernel's diagnosis, from the cases it completed (the others have no outputs to read)
  if (!r.conformant) {
    std::vector<FailingCase> failing;
    for (const VerifiedCase& v : r.cases)
      if (!v.conformant() && v.failure.empty()) failing.push_back({&v.expected, &v.actual});
    r.diagnosis = diagnose(format, failing);
  }
  const std::string library_rounding = library_rounding_text(totals, policy);
  r.summary = fmt::format("verify: kernel {} ({}), format {}, policy {}{}: {} of {} cases conformant: {}; {}{}",
                          printable(k.kernel), printable(k.library), format.name, policy.name,
                          policy.strict ? " (strict)" : "", r.conformant_cases, r.cases.size(),
                          r.conformant ? "conformant" : "NOT conformant", library_rounding,
                          r.diagnosis.line.empty() ? "" : "; " + r.diagnosis.line);
  r.json = {{"kernel", k.kernel},
            {"library", k.library},
            {"format", format.name},
            {"policy", policy.name},
            {"strict", policy.strict},
            {"conformant", r.conformant},
            {"library_rounding", library_rounding_json(totals, policy)},
            {"cases", cases}};
  if (!r.diagnosis.line.empty()) r.json["diagnosis"] = r.diagnosis.json();
  std::string device_md;
  if (const std::optional<CudaDevice>& device = o.device) {
    r.json["device"] = {{"name", device->name},
                        {"compute_capability", std::to_string(device->major) + "." + std::to_string(device->minor)},
                        {"driver_version", cuda_version(device->driver)},
                        {"runtime_version", cuda_version(device->runtime)}};
    device_md = fmt::format("\nDevice: {} (compute capability {}.{}), CUDA driver {}, runtime {}.\n\n"
                            "| case | kernel time (ms, CUDA events) |\n|---|---|\n",
                            markdown_code(device->name), device->major, device->minor, cuda_version(device->driver),
                            cuda_version(device->runtime));
    for (const VerifiedCase& v : r.cases)
      device_md += "| " + markdown_code(v.label) + " | " + (v.kernel_ms ? fmt::format("{:.3f}", *v.kernel_ms) : "n/a") + " |\n";
  }
  r.markdown = fmt::format("# lowbit verify: kernel {}, format {}: {}\n\n{} of {} cases conformant under policy {}{}; "
                           "{}.\n{}{}{}",
                           markdown_code(k.kernel), format.name, r.conformant ? "conformant" : "NOT conformant",
                           r.conformant_cases, r.cases.size(), markdown_text(policy.name),
                           policy.strict ? " (strict: every mismatch fails)" : "", library_rounding,
                           r.diagnosis.line.empty() ? "" : "\n" + markdown_text(r.diagnosis.line) + ".\n", device_md, details);
}

std::string json_type(const nlohmann::json& v) {
  return v.is_boolean() ? "true or false" : v.is_number() ? "a number" : v.is_string() ? "a string" : v.type_name();
}

// The given params, each alone over the defaults and then all together: a key the format lacks, a
// value of another type than its default, or one the reference refuses on a small input (the
// `special` values; a format without inputs: its table) is a VerifyParamError naming that param.
void check_params(const FormatSpec& format, const nlohmann::json& given, const MadeBy& made_by) {
  if (!given.is_object()) throw VerifyParamError(given.dump(), "params must be an object of KEY: VALUE");
  const auto probe = [&](const nlohmann::json& over) {
    const InputRun run{"special", resolve_params(format, over)};
    if (!takes_input(format)) run_reference(format, table_case(format, run.params, made_by).inputs);
    else for_each_reference_case(format, run, 1, made_by, false, [](const std::string&, const Case&) {}, {});
  };
  for (const auto& [key, value] : given.items()) {
    const std::string item = param_items({{key, value}});
    if (!format.default_params.contains(key)) {
      std::string keys;
      for (const auto& [k, v] : format.default_params.items()) keys += (keys.empty() ? "" : ", ") + k;
      throw VerifyParamError(item, format.name + " has no parameter '" + key + "' (its parameters: " +
                                       (keys.empty() ? "none" : keys) + ")");
    }
    const nlohmann::json& fallback = format.default_params.at(key);
    if (json_type(value) != json_type(fallback))
      throw VerifyParamError(item, key + " takes " + json_type(fallback) + " (its default is " + fallback.dump() + ")");
    try {
      probe({{key, value}});
    } catch (const std::exception& e) {
      throw VerifyParamError(item, e.what());
    }
  }
  try {
    probe(given);
  } catch (const std::exception& e) {
    throw VerifyParamError(param_items(given), e.what());
  }
}

}  // namespace

std::string param_items(const nlohmann::json& params) {
  std::string text;
  for (const auto& [key, value] : params.items())
    text += (text.empty() ? "" : ", ") + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  return text;
}

VerifyParamError::VerifyParamError(std::string given, std::string reason)
    : std::invalid_argument(given + ": " + reason), param(std::move(given)), why(std::move(reason)) {}

VerifyInputError::VerifyInputError(std::string input_spec, std::string reason)
    : std::invalid_argument(input_spec.empty() ? reason : "input '" + input_spec + "': " + reason),
      input(std::move(input_spec)),
      why(std::move(reason)) {}

std::string verify_case_line(const VerifiedCase& v) {
  if (!v.failure.empty()) return fmt::format("FAILED   {}: the kernel {}", printable(v.label), printable(v.failure));
  ComparisonTotals n;
  n.add(v.report);
  std::string faults;
  for (const TensorComparison& t : v.report.tensors)
    if (!t.fault.empty()) faults += "; " + t.name + ": " + t.fault;
  const std::string kernel_ms = v.kernel_ms ? fmt::format(", kernel {:.3f} ms", *v.kernel_ms) : "";
  // NaN encodings apart from the numeric mismatches; library rounding named wherever it occurs
  const std::uint64_t nan = n.count(MismatchClass::NanEncoding), library = n.count(MismatchClass::LibraryRounding);
  const std::uint64_t numeric = n.mismatches - nan;
  if (v.conformant())
    return fmt::format("ok       {}: {} elements, {} mismatches ({} allowed){}{}{}{}", printable(v.label), n.elements, numeric,
                       n.allowed, nan ? fmt::format(", {} NaN encodings", nan) : "",
                       library ? fmt::format(", {} library-rounding", library) : "", printable(faults), kernel_ms);
  // What is wrong, in words: the numeric mismatches, and apart from them the NaNs whose bits differ
  // (never "0 mismatches" alone on a MISMATCH line); then every class with its count.
  std::string what;
  if (numeric > 0 || nan == 0) what = fmt::format("{} mismatches ({} allowed)", numeric, n.allowed);
  else what = "no numeric mismatch";
  if (nan > 0)
    what += fmt::format("{} {} NaN{} of another sign or payload (nan-encoding)", numeric > 0 ? ", and" : ";", nan,
                        nan == 1 ? "" : "s");
  std::string classes;
  for (MismatchClass c : kMismatchClasses)
    if (const std::uint64_t k = n.count(c))
      classes += fmt::format("{}{} {}", classes.empty() ? "; classes: " : ", ", mismatch_class_name(c), k);
  return fmt::format("MISMATCH {}: {} elements, {}{}{}{}", printable(v.label), n.elements, what, classes, printable(faults),
                     kernel_ms);
}

VerifyReport verify(const KernelUnderReview& k, const FormatSpec& format, const VerifyOptions& o, const VerifyEvents& events) {
  // The default inputs are made for any format; one a format cannot take (COAT's activations want
  // 2-D tiles, torchao whole blocks) is skipped with its reason. An input given is never skipped.
  const bool defaults = o.inputs.empty();
  if (!o.params.empty()) check_params(format, o.params, o.made_by);
  std::vector<InputRun> runs;
  for (const std::string& text : o.inputs) runs.push_back({text, format.default_params});
  if (defaults && takes_input(format)) runs = default_input_runs(format, o.params);
  // the given params over every run's, each run once (the battery's own values of a given param collapse)
  std::vector<InputRun> given;
  for (InputRun& run : runs) {
    run.params.update(o.params);
    if (std::none_of(given.begin(), given.end(), [&](const InputRun& g) { return g.spec == run.spec && g.params == run.params; }))
      given.push_back(std::move(run));
  }
  runs = std::move(given);
  if (!o.save_cases.empty()) std::filesystem::create_directories(o.save_cases);

  VerifyReport r;
  const auto skip = [&](const std::string& line) {
    if (events.case_skipped) events.case_skipped(line);
    r.skipped.push_back(line);
  };
  const auto record = [&](VerifiedCase v) {
    if (events.case_done) events.case_done(v, verify_case_line(v));
    if (!o.save_cases.empty() && !v.conformant()) {
      const std::string stem = (std::filesystem::path(o.save_cases) / file_name_safe(v.label)).string();
      write_case(stem + ".expected.safetensors", v.expected);
      write_case(stem + ".actual.safetensors", v.actual);
    }
    r.cases.push_back(std::move(v));
  };
  if (!takes_input(format)) {
    CaseToRun c = table_case(format, resolve_params(format, o.params), o.made_by);
    record(verify_case(k, format, run_reference(format, c.inputs, o.threads), o.policy, c.stem));
  }
  for (const InputRun& run : runs) {
    if (o.f32_only && defaults && parse_input_spec(run.spec).dtype() != DType::F32) {
      skip(fmt::format("skipped  {}: a 16-bit input (the kernel takes F32 only: --f32-only)", printable(run.spec)));
      continue;
    }
    try {
      for_each_reference_case(
          format, run, o.steps, o.made_by, defaults,
          [&](const std::string& stem, const Case& expected) { record(verify_case(k, format, expected, o.policy, stem)); },
          [&](const std::string& stem, const std::string& why) {
            skip(fmt::format("skipped  {}: {}", printable(stem), printable(why)));
          },
          o.threads);
    } catch (const PluginError&) {
      throw;
    } catch (const std::exception& e) {  // a bad spec, or an input the format cannot take, named as given
      throw VerifyInputError(run.spec, e.what());
    }
  }
  if (!o.golden.empty() && std::filesystem::exists(std::filesystem::path(o.golden) / "MANIFEST.json")) {
    const FolderLock reading(o.golden, FolderLock::Mode::shared);  // no --replace rewrites a case under us
    const Manifest manifest = read_golden_manifest(o.golden);
    for (const ManifestEntry* e : select_entries(manifest, format.name)) {
      Case golden = read_verified_case(o.golden, *e);
      if (const std::string why = golden_skip(format, golden, e->path, o.f32_only); !why.empty()) {
        skip(why);
        continue;
      }
      record(verify_case(k, format, golden, o.policy, "golden " + e->path));
    }
  }
  if (r.cases.empty()) throw VerifyInputError("", "nothing to verify: no input, and no golden case of " + format.name);
  finish_report(k, format, o, r);
  return r;
}

}  // namespace lowbit
