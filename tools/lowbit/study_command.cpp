// lowbit study coat-expansion: the oracle study of COAT's expansion quantizer — the official float32
// path against the exact mathematics on the same group statistics (docs/formats/coat.md has the
// table). A study, not a conformance check: exit 0 when it ran. The reports hold no timings, so
// they are the same bytes for any --threads (times go to stderr).
#include <limits>
#include <fmt/core.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "command.hpp"
#include "number_option.hpp"
#include "lowbit/coat_study.hpp"
#include "report_output.hpp"
#include "subcommand.hpp"
#include "threads_option.hpp"

namespace lowbit::cli {

namespace {

// --groups: each group of 128 is solved in exact arithmetic too (milliseconds) and its row kept until
// the report; 10^6 groups per input kind bound a run to hours, not years
constexpr std::uint64_t kMaxStudyGroups = 1000000;

struct StudyOptions {
  std::uint64_t groups = 1000;
  std::uint64_t seed = 1;
  int expand_min = 16;
  int threads = default_threads();
  ReportOutput output;
};

nlohmann::json to_json(const StudyOptions& o, const std::vector<coat::StudyRow>& rows) {
  nlohmann::json j = {{"tool", "lowbit"}, {"version", version()}, {"command", "study coat-expansion"},
                      {"groups_per_input", o.groups}, {"seed", o.seed}, {"expand_min", o.expand_min}};
  j["inputs"] = nlohmann::json::array();
  for (const coat::StudyRow& r : rows)
    j["inputs"].push_back({{"input", r.input}, {"groups", r.groups}, {"degenerate_groups", r.degenerate_groups},
                           {"k_differs", r.k_differs}, {"elements", r.elements}, {"codes_differ", r.codes_differ},
                           {"max_code_distance", r.max_code_distance}, {"prequantized_ulp_max", r.y_ulp_max},
                           {"prequantized_ulp_mean", r.y_ulp_mean}, {"prequantized_over_half_ulp", r.y_over_half_ulp},
                           {"scale_ulp_max", r.scale_ulp_max}, {"scale_ulp_mean", r.scale_ulp_mean},
                           {"roundtrip_rel_error_official", r.roundtrip_rel_official},
                           {"roundtrip_rel_error_exact", r.roundtrip_rel_exact},
                           {"roundtrip_rel_error_paper", r.roundtrip_rel_paper}});
  return j;
}

std::string to_markdown(const StudyOptions& o, const std::vector<coat::StudyRow>& rows) {
  std::string md = fmt::format(
      "# COAT expansion: official float32 path against exact mathematics\n\n"
      "`lowbit study coat-expansion --groups {} --seed {}` (lowbit {}, expand_min {}). Each group has 128 elements; "
      "its scale is log-uniform over [1e-6, 0.1]. Both paths use the kernel's own group statistics (A = max + 1e-30, "
      "B = min + 1e-30 from its shuffle tree); the exact path then computes k, 448 (|x| / A)^k and the dequantized "
      "value with 113-bit arithmetic and rounds once.\n\n"
      "| input | groups | degenerate | k differs | elements | codes differ | max code distance | t/s error max (ulp) "
      "| mean | > 0.5 ulp | scale error max (ulp) | mean | round trip rel. error, official | exact | paper math |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
      o.groups, o.seed, version(), o.expand_min);
  for (const coat::StudyRow& r : rows)
    md += fmt::format("| {} | {} | {} | {} | {} | {} ({:.4f} %) | {} | {:.2f} | {:.3f} | {:.2f} % | {:.2f} | {:.3f} | {:.4e} | {:.4e} | {:.4e} |\n",
                      r.input, r.groups, r.degenerate_groups, r.k_differs, r.elements, r.codes_differ,
                      r.elements ? 100.0 * static_cast<double>(r.codes_differ) / static_cast<double>(r.elements) : 0.0,
                      r.max_code_distance, r.y_ulp_max, r.y_ulp_mean, 100.0 * r.y_over_half_ulp, r.scale_ulp_max,
                      r.scale_ulp_mean, r.roundtrip_rel_official, r.roundtrip_rel_exact, r.roundtrip_rel_paper);
  md += "\nColumns: *degenerate* groups (R <= 1 or k not finite) and groups whose *k differs* are left out of the "
        "per-element columns. *t/s error*: the value the kernel casts to E4M3, against the exact 448 (|x| / A)^k, in "
        "binary32 ulps. *scale error*: the stored s against the exact (A / c)^k / 448 with the kernel's k and c. *Round "
        "trip*: mean |dequantized - x| / |x| over the nonzero elements; *paper math*: the README's f(x) = sign(x) |x|^k "
        "with k = log(448 / 2^-9) / log(max / min) unrounded over the true nonzero minimum, no centre, exact.\n";
  return md;
}

int run_study(StudyOptions o) {
  if (o.groups < 1) throw UsageError("--groups must be at least 1");
  if (o.expand_min < 1) throw UsageError("--expand-min must be at least 1");
  o.output.prepare();
  const std::vector<coat::StudyRow> rows = coat::run_expansion_study(o.groups, o.seed, o.expand_min, o.threads);
  for (const coat::StudyRow& r : rows)
    fmt::print(stderr, "{}: {} groups, k differs in {}, {} of {} codes differ, {:.1f} s\n", r.input, r.groups,
               r.k_differs, r.codes_differ, r.elements, r.seconds);
  const std::string md = to_markdown(o, rows);
  o.output.write(to_json(o, rows).dump(2) + "\n", md);
  if (o.output.json_path.empty() && o.output.markdown_path.empty()) fmt::print("{}", md);
  return kConformant;
}

}  // namespace

Subcommand add_study_command(CLI::App& parent) {
  CLI::App* study = parent.add_subcommand("study", "Numerical studies of a format against exact mathematics");
  study->require_subcommand(1);
  CLI::App* cmd = study->add_subcommand(
      "coat-expansion",
      "COAT's Dynamic Range Expansion quantizer, official float32 path (CUDA log2f/powf emulated, the kernel's order\n"
      "of operations) against the exact mathematics on the same group statistics: how often k and the FP8 codes\n"
      "change, how many ulps the value cast to FP8 and the scale are off, and the round-trip error of both.\n"
      "Prints the Markdown table when no report path is given; exit 0 when it ran.");
  auto o = std::make_shared<StudyOptions>();
  add_whole_option(*cmd, "--groups", o->groups, std::uint64_t{1}, kMaxStudyGroups, "Groups of 128 per input kind");
  add_whole_option(*cmd, "--seed", o->seed, std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max(),
                   "Seed of the group draws");
  add_whole_option(*cmd, "--expand-min", o->expand_min, 1, 1 << 20,
                   "expand_min (k is floored to a multiple of 1/expand_min)");
  add_threads_option(*cmd, o->threads);
  o->output.add_options(*cmd);
  return {study, [o] { return run_study(*o); }};
}

}  // namespace lowbit::cli
