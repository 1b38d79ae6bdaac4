// lowbit compare EXPECTED ACTUAL: bitwise comparison of two case files under a tolerance policy.
#include <fmt/core.h>

#include "command.hpp"
#include "number_option.hpp"
#include "lowbit/compare.hpp"
#include "lowbit/manifest.hpp"
#include "lowbit/printable.hpp"
#include "report_output.hpp"
#include "shipped_data.hpp"
#include "subcommand.hpp"

namespace lowbit::cli {

namespace {

struct CompareOptions {
  std::string expected, actual, policy;
  std::size_t max_listed = 20;
  bool strict = false;
  ReportOutput output;
};

// The policy named on the command line, else the format's documented default, else bit-exact.
TolerancePolicy policy_for(const std::string& requested, const Case& expected) {
  std::string name = requested;
  if (name.empty()) {
    const FormatSpec* spec = find_format(expected.format());
    name = spec ? spec->default_tolerance : "bit-exact";
  }
  try {
    return load_tolerance_policy(name, shipped_policy_dir());
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

void print_summary(const ComparisonReport& r) {
  ComparisonTotals totals;
  totals.add(r);
  // the verdict, then on the next line the share of library roundings
  fmt::print("{}: {} vs {}, format {}, policy {}{}\n{}\n", r.conformant ? "conformant" : "NOT conformant",
             printable(r.expected_origin), printable(r.actual_origin), r.format.empty() ? "(none)" : printable(r.format),
             printable(r.policy.name), r.policy.strict ? " (strict)" : "", library_rounding_text(totals, r.policy));
  for (const TensorComparison& t : r.tensors) {
    if (!t.fault.empty()) {
      fmt::print("  {}: {}\n", printable(t.name), printable(t.fault));
      continue;
    }
    fmt::print("  {}: {} elements, {} mismatches ({} allowed)\n", printable(t.name), t.elements, t.mismatches, t.allowed);
    for (const MismatchRecord& m : t.first_mismatches)
      fmt::print("    [{}] block {}: expected 0x{:x} ({:.9g}) actual 0x{:x} ({:.9g}), {}{}{}\n", m.index, m.block,
                 m.expected_bits, m.expected_value, m.actual_bits, m.actual_value, mismatch_class_name(m.why.cls),
                 m.why.variant.empty() ? "" : " (" + std::string(m.why.variant) + ")", m.allowed ? " (allowed)" : "");
  }
}

int run_compare(CompareOptions o) {
  o.output.prepare();
  const Case expected = read_case_guarded(o.expected);
  const Case actual = read_case_guarded(o.actual);
  TolerancePolicy policy = policy_for(o.policy, expected);
  policy.strict = o.strict;
  const ComparisonReport r = compare_cases(expected, actual, policy, o.max_listed);
  print_summary(r);
  o.output.write(report_json(r).dump(2) + "\n", report_markdown(r));
  return r.conformant ? kConformant : kNotConformant;
}

}  // namespace

Subcommand add_compare_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "compare",
      "Compare an actual case file with an expected one, bit for bit, tensor by tensor. Each mismatch gets its\n"
      "code distance, ulp distance and class (tie, near-boundary, scale-propagated, library-rounding,\n"
      "arithmetic-variant, flushed-subnormal, nan-encoding, genuine);\n"
      "the tolerance policy decides which classes conform. Exit 0 conformant, 1 not, 2 unreadable input.");
  auto o = std::make_shared<CompareOptions>();
  cmd->add_option("EXPECTED", o->expected, "Expected case (safetensors), e.g. a golden file")->required();
  cmd->add_option("ACTUAL", o->actual, "Actual case (safetensors), e.g. a kernel's dumped outputs")->required();
  cmd->add_option("--policy", o->policy,
                  "Tolerance policy: bit-exact, a shipped policy's name (e.g. bnb-cuda; from " +
                      shipped_policy_dir().string() + "),\nor a JSON file (a path containing '/' or ending in .json);\n"
                  "default: the format's own default (bit-exact for every reference format)");
  // at most every element of a generated input (2^28): beyond that the list is all of them anyway
  add_whole_option(*cmd, "--max-listed", o->max_listed, std::size_t{0}, std::size_t{1} << 28,
                   "Mismatches listed per tensor");
  cmd->add_flag("--strict", o->strict, "Every mismatch fails, also those the policy allows (the report records strict)");
  o->output.add_options(*cmd);
  return {cmd, [o] { return run_compare(*o); }};
}

}  // namespace lowbit::cli
