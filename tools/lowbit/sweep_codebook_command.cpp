// lowbit sweep codebook: every binary32 value in a qmap's range through the codebook searches of
// torchao and bitsandbytes, with the disagreements between each pair counted (the numbers of
// docs/formats/codebook-differences.md). A report of differences, not a conformance check: exit 0.
#include <fmt/core.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "command.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/codebook_sweep.hpp"
#include "lowbit/float_bits.hpp"
#include "progress.hpp"
#include "report_output.hpp"
#include "subcommand.hpp"
#include "threads_option.hpp"

namespace lowbit::cli {

namespace {

using codebook::kSearches;
using codebook::search_name;

struct CodebookSweepOptions {
  std::string qmap = "signed8";
  std::string linspace = "fma";
  int threads = default_threads();
  ReportOutput output;
  bool quiet = false;
};

std::string hex32(std::uint32_t v) { return fmt::format("0x{:08x}", v); }

nlohmann::json to_json(const CodebookSweepOptions& o, const codebook::SearchSweepResult& r) {
  nlohmann::json j = {{"tool", "lowbit"}, {"version", version()}, {"command", "sweep codebook"}, {"qmap", o.qmap},
                      {"linspace", o.linspace}, {"inputs", r.inputs}, {"exact_ties", r.exact_ties},
                      {"seconds", r.seconds}};
  j["searches"] = nlohmann::json::array();
  for (std::size_t a = 0; a < kSearches.size(); ++a) {
    nlohmann::json unreachable = nlohmann::json::array();
    for (std::size_t k = 0; k < 256; ++k)
      if (!r.produced[a][k]) unreachable.push_back(k);
    j["searches"].push_back({{"name", search_name(kSearches[a])}, {"codes_never_produced", unreachable}});
  }
  j["pairs"] = nlohmann::json::array();
  for (std::size_t a = 0; a < kSearches.size(); ++a)
    for (std::size_t b = a + 1; b < kSearches.size(); ++b) {
      nlohmann::json examples = nlohmann::json::array();
      for (const auto& e : r.examples[a][b])
        examples.push_back({{"input", hex32(e.input_bits)}, {"value", float_from_bits(e.input_bits)},
                            {search_name(kSearches[a]), e.codes[a]}, {search_name(kSearches[b]), e.codes[b]}});
      j["pairs"].push_back({{"a", search_name(kSearches[a])}, {"b", search_name(kSearches[b])},
                            {"disagreements", r.disagreements[a][b]}, {"examples", examples}});
    }
  return j;
}

std::string to_markdown(const CodebookSweepOptions& o, const codebook::SearchSweepResult& r) {
  std::string md = fmt::format("# Codebook searches compared: {} ({} linspace)\n\n{} binary32 inputs in the map's range, "
                               "{} of them exactly half-way between two neighbouring entries; lowbit {}, {:.1f} s.\n\n",
                               o.qmap, o.linspace, r.inputs, r.exact_ties, version(), r.seconds);
  md += "Inputs on which two searches give different codes:\n\n|  |";
  for (auto s : kSearches) md += fmt::format(" {} |", search_name(s));
  md += "\n|---|";
  for (std::size_t k = 0; k < kSearches.size(); ++k) md += "---:|";
  md += "\n";
  for (std::size_t a = 0; a < kSearches.size(); ++a) {
    md += fmt::format("| **{}** |", search_name(kSearches[a]));
    for (std::size_t b = 0; b < kSearches.size(); ++b) md += a == b ? " - |" : fmt::format(" {} |", r.disagreements[a][b]);
    md += "\n";
  }
  md += "\nCodes a search never produces on this range:\n\n";
  for (std::size_t a = 0; a < kSearches.size(); ++a) {
    std::string list;
    for (std::size_t k = 0; k < 256; ++k)
      if (!r.produced[a][k]) list += (list.empty() ? "" : ", ") + std::to_string(k);
    md += fmt::format("- {}: {}\n", search_name(kSearches[a]), list.empty() ? "none" : list);
  }
  md += "\nFirst examples per pair (input bits, value, the two codes):\n\n| pair | input | value | codes |\n|---|---|---:|---|\n";
  for (std::size_t a = 0; a < kSearches.size(); ++a)
    for (std::size_t b = a + 1; b < kSearches.size(); ++b)
      for (const auto& e : r.examples[a][b])
        md += fmt::format("| {} / {} | {} | {:.9g} | {} / {} |\n", search_name(kSearches[a]), search_name(kSearches[b]),
                          hex32(e.input_bits), float_from_bits(e.input_bits), e.codes[a], e.codes[b]);
  return md;
}

int run_sweep_codebook(CodebookSweepOptions o) {
  o.output.prepare();
  const auto variant = o.linspace == "fma" ? codebook::Linspace::Fma : codebook::Linspace::NoFma;
  codebook::SearchSweepConfig cfg;
  cfg.qmap = o.qmap == "signed8" ? codebook::signed8(variant) : codebook::unsigned8(variant);
  cfg.is_signed = o.qmap == "signed8";
  cfg.threads = o.threads;
  Progress progress(fmt::format("sweep codebook {}", o.qmap), o.quiet);
  cfg.progress = [&progress](std::uint64_t done, std::uint64_t total) { progress.update(done, total); };
  const codebook::SearchSweepResult r = codebook::run_search_sweep(cfg);
  progress.finish();
  fmt::print("{}: {} inputs, {} exact ties, {:.1f} s\n", o.qmap, r.inputs, r.exact_ties, r.seconds);
  for (std::size_t b = 1; b < kSearches.size(); ++b)
    fmt::print("  torchao vs {}: {} inputs differ\n", search_name(kSearches[b]), r.disagreements[0][b]);
  o.output.write(to_json(o, r).dump(2) + "\n", to_markdown(o, r));
  return kConformant;
}

}  // namespace

Subcommand add_sweep_codebook_command(CLI::App& sweep) {
  CLI::App* cmd = sweep.add_subcommand(
      "codebook",
      "Run every binary32 value of a qmap's range ([-1, 1] signed, [0, 1] unsigned) through the searches of torchao,\n"
      "bitsandbytes (CUDA rule, default back end, CPU lookup table, old CPU search) and exact nearest, and count the\n"
      "inputs on which each pair disagrees. A report of differences: exit 0 when it ran.");
  auto o = std::make_shared<CodebookSweepOptions>();
  cmd->add_option("--qmap", o->qmap, "signed8 or unsigned8 (the dynamic maps)")
      ->capture_default_str()
      ->check(CLI::IsMember({"signed8", "unsigned8"}));
  cmd->add_option("--linspace", o->linspace, "fma (x86 AVX2/AVX-512, aarch64 builds of torch) or nofma")
      ->capture_default_str()
      ->check(CLI::IsMember({"fma", "nofma"}));
  add_threads_option(*cmd, o->threads);
  o->output.add_options(*cmd);
  cmd->add_flag("--quiet,-q", o->quiet, "No progress on stderr");
  return {cmd, [o] { return run_sweep_codebook(*o); }};
}

}  // namespace lowbit::cli
