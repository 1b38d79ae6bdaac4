// lowbit conform: the reference on every golden case's inputs, compared with the case's outputs.
#include <fmt/core.h>

#include <map>

#include "command.hpp"
#include "lowbit/atomic_file.hpp"
#include "lowbit/compare.hpp"
#include "lowbit/manifest.hpp"
#include "lowbit/printable.hpp"
#include "report_output.hpp"
#include "shipped_data.hpp"
#include "subcommand.hpp"
#include "threads_option.hpp"

namespace lowbit::cli {

namespace {

struct ConformOptions {
  std::string golden = shipped_golden_dir().string();  // the golden cases shipped with lowbit
  std::string format_glob = "*";
  bool strict = false;
  int threads = 1;
  ReportOutput output;
};

struct FormatTally {
  std::uint64_t cases = 0, conformant = 0;
  ComparisonTotals totals;
  TolerancePolicy policy;
};

int run_conform(ConformOptions o) {
  o.output.prepare();
  const FolderLock reading(o.golden, FolderLock::Mode::shared);  // a golden generate --replace waits for the run
  const Manifest manifest = read_golden_manifest(o.golden);
  const std::vector<const ManifestEntry*> selected = select_entries(manifest, o.format_glob);
  if (selected.empty()) {
    throw UsageError(fmt::format("no golden case in {} matches format '{}' ({} listed in its MANIFEST.json): nothing to check",
                                 o.golden, o.format_glob, manifest.files.size()));
  }

  nlohmann::json cases = nlohmann::json::array();
  std::string details;
  std::map<std::string, FormatTally> by_format;
  bool all_conformant = true;
  ComparisonTotals overall;
  for (const ManifestEntry* e : selected) {
    const Case expected = read_verified_case(o.golden, *e);
    const FormatSpec* spec = find_format(expected.format());
    if (!spec) throw UsageError(expected.origin + ": format '" + expected.format() + "' is not registered");
    validate_case(*spec, expected, CaseScope::Complete);  // a golden case holds every input and output
    const Case actual = run_reference(*spec, expected, o.threads);
    TolerancePolicy policy = load_tolerance_policy(spec->default_tolerance, shipped_policy_dir());
    policy.strict = o.strict;
    const ComparisonReport r = compare_cases(expected, actual, policy);
    FormatTally& t = by_format[spec->name];
    ++t.cases;
    t.conformant += r.conformant;
    t.policy = r.policy;
    t.totals.add(r);
    overall.add(r);
    all_conformant = all_conformant && r.conformant;
    cases.push_back(report_json(r));
    if (!r.conformant) details += "\n" + report_markdown(r);
  }

  std::string md = fmt::format("# Conformance of the reference to the golden cases: {}{}\n\n"
                               "Golden folder {}, format filter {}; each format under its default tolerance policy "
                               "(docs/tolerance-policy.md){}.\n\n"
                               "| format | policy | cases | conformant | elements compared | mismatches | of which allowed "
                               "| library-rounding |\n"
                               "|---|---|---:|---:|---:|---:|---:|---:|\n",
                               all_conformant ? "conformant" : "NOT conformant", o.strict ? " (strict)" : "",
                               markdown_code(o.golden), markdown_code(o.format_glob),
                               o.strict ? "; --strict: every mismatch fails" : "");
  nlohmann::json summary = nlohmann::json::object();
  for (const auto& [name, t] : by_format) {
    const ComparisonTotals& n = t.totals;
    const std::uint64_t library = n.count(MismatchClass::LibraryRounding);
    fmt::print("{}: {} cases, {} conformant, {} elements compared, {} mismatches ({} allowed by {}{}){}\n", name, t.cases,
               t.conformant, n.elements, n.mismatches, n.allowed, t.policy.name, o.strict ? ", strict" : "",
               library ? "; " + library_rounding_text(n, t.policy) : "");
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", name, t.policy.name, t.cases, t.conformant, n.elements,
                      n.mismatches, n.allowed, library);
    summary[name] = {{"policy", t.policy.name},   {"cases", t.cases},           {"conformant", t.conformant},
                     {"elements", n.elements},     {"mismatches", n.mismatches}, {"allowed", n.allowed},
                     {"library_rounding", library_rounding_json(n, t.policy)}};
  }
  // overall: under the policies of the formats (each allows library-rounding or not; reported per format)
  // of the numeric mismatches, as library_rounding_text counts them (NaN encodings apart)
  const std::uint64_t library = overall.count(MismatchClass::LibraryRounding);
  const std::uint64_t nan = overall.count(MismatchClass::NanEncoding), numeric = overall.mismatches - nan;
  const std::string nan_apart = nan ? fmt::format(" ({} NaN encoding{} apart)", nan, nan == 1 ? "" : "s") : "";
  fmt::print("conform: {} of {} {}mismatches are library-rounding{}{}: {}\n", library, numeric, nan ? "numeric " : "",
             nan_apart, o.strict ? " (strict: none allowed)" : "", all_conformant ? "conformant" : "NOT conformant");
  md += fmt::format("\n{} of {} {}mismatches are library-rounding{}.\n", library, numeric, nan ? "numeric " : "", nan_apart);
  nlohmann::json j = {{"golden", o.golden}, {"format_glob", o.format_glob}, {"conformant", all_conformant},
                      {"strict", o.strict},
                      {"library_rounding", {{"count", library}, {"mismatches", overall.mismatches}, {"nan_encodings", nan}}},
                      {"by_format", summary}, {"cases", cases}};
  o.output.write(j.dump(2) + "\n", md + details);
  return all_conformant ? kConformant : kNotConformant;
}

}  // namespace

Subcommand add_conform_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "conform",
      "Run the reference on the inputs of every golden case (hash-checked against MANIFEST.json) and compare\n"
      "its outputs with the case's, bit for bit, under the format's default tolerance policy. Prints a summary\n"
      "per format; exit 0 only if all conform.");
  auto o = std::make_shared<ConformOptions>();
  cmd->add_option("--golden", o->golden, "Folder holding MANIFEST.json and the case files")->capture_default_str();
  cmd->add_option("--format", o->format_glob, "Only formats matching this glob, e.g. 'torchao.*'")->capture_default_str();
  cmd->add_flag("--strict", o->strict, "Every mismatch fails, also those a format's policy allows (recorded in the report)");
  add_case_threads_option(*cmd, o->threads);
  o->output.add_options(*cmd);
  return {cmd, [o] { return run_conform(*o); }};
}

}  // namespace lowbit::cli
