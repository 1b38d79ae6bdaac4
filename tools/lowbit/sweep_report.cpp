#include "sweep_report.hpp"

#include <fmt/core.h>

#include "command.hpp"
#include "lowbit/simd_level.hpp"

namespace lowbit::cli {

namespace {

std::string hex(std::uint32_t v, int digits) { return fmt::format("0x{:0{}x}", v, digits); }

int input_digits(fp8::Source s) { return s == fp8::Source::F32 ? 8 : 4; }

float input_value(fp8::Source s, std::uint32_t pattern) {
  switch (s) {
    case fp8::Source::F32: return float_from_bits(pattern);
    case fp8::Source::BF16: return widen_bf16(static_cast<std::uint16_t>(pattern));
    case fp8::Source::F16: return widen_f16(static_cast<std::uint16_t>(pattern));
  }
  return 0;
}

// JSON has no NaN or Inf: such values are written as strings.
nlohmann::json number(float v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? (std::signbit(v) ? "-nan" : "nan") : (v < 0 ? "-inf" : "inf");
}

std::string label(const SweepRun& r) {
  return fmt::format("{} / {} / from {} / {}", fp8::format_info(r.config.format).name,
                     fp8::overflow_name(r.config.policy.overflow), fp8::source_name(r.config.source),
                     fp8::rounding_name(r.config.rounding));
}

bool all_clean(const std::vector<SweepRun>& runs) {
  for (const SweepRun& r : runs)
    if (r.result.mismatches != 0 || r.result.fast_path.mismatches != 0) return false;
  return true;
}

}  // namespace

nlohmann::json sweep_report_json(const std::vector<SweepRun>& runs) {
  nlohmann::json out;
  out["tool"] = "lowbit";
  out["version"] = version();
  out["command"] = "sweep fp8";
  out["checker"] = "double-precision nearest search over the format's value table (DoubleChecker), "
                   "validated against the Boost.Multiprecision oracle";
  out["policy"] = "bit-exact: every code must equal the checker's";
  out["conformant"] = all_clean(runs);
  out["runs"] = nlohmann::json::array();
  for (const SweepRun& r : runs) {
    const auto& c = r.config;
    nlohmann::json run;
    run["format"] = fp8::format_info(c.format).name;
    run["overflow"] = fp8::overflow_name(c.policy.overflow);
    run["nan_encoding"] = {{"name", r.nan_encoding_name},
                           {"magnitude", hex(c.policy.nan.magnitude, 2)},
                           {"keeps_sign", c.policy.nan.keeps_sign}};
    run["source"] = fp8::source_name(c.source);
    run["rounding"] = fp8::rounding_name(c.rounding);
    if (c.rounding == fp8::Rounding::Stochastic) run["seed"] = c.seed;
    run["threads"] = c.threads;
    run["inputs"] = r.result.inputs;
    run["mismatches"] = r.result.mismatches;
    run["seconds"] = r.result.seconds;
    for (fp8::InputClass k : fp8::kInputClasses) {
      const fp8::Tally& t = r.result.by_class[static_cast<std::size_t>(k)];
      run["classes"][std::string(fp8::input_class_name(k))] = {{"inputs", t.inputs}, {"mismatches", t.mismatches}};
    }
    run["ties"] = {{"inputs", r.result.ties.inputs}, {"mismatches", r.result.ties.mismatches}};
    run["fast_path"] = {{"inputs", r.result.fast_path.inputs}, {"mismatches", r.result.fast_path.mismatches}};
    if (r.result.fast_path.inputs) run["fast_path"]["simd"] = std::string(simd::level_name(simd::active()));
    run["first_mismatches"] = nlohmann::json::array();
    for (const fp8::Mismatch& m : r.result.first_mismatches) {
      nlohmann::json j = {{"input", hex(m.input_bits, input_digits(c.source))},
                          {"input_value", number(input_value(c.source, m.input_bits))},
                          {"expected", hex(m.expected, 2)},
                          {"expected_value", number(fp8::decode(c.format, m.expected))},
                          {"actual", hex(m.actual, 2)},
                          {"actual_value", number(fp8::decode(c.format, m.actual))}};
      if (c.rounding == fp8::Rounding::Stochastic) j["random_bits"] = hex(m.random_bits, 8);
      run["first_mismatches"].push_back(j);
    }
    out["runs"].push_back(run);
  }
  return out;
}

std::string sweep_report_markdown(const std::vector<SweepRun>& runs) {
  std::uint64_t inputs = 0, mismatches = 0;
  for (const SweepRun& r : runs) {
    inputs += r.result.inputs;
    mismatches += r.result.mismatches;
  }
  std::string md = fmt::format("# FP8 sweep: {}\n\n{} mismatches in {} inputs over {} run(s); lowbit {}. "
                               "Policy: bit-exact against an independent double-precision checker.\n\n",
                               mismatches == 0 ? "conformant" : "NOT conformant", mismatches, inputs, runs.size(),
                               version());
  md += "| format | overflow | NaN encoding | from | rounding | inputs | ties | mismatches | seconds |\n";
  md += "|---|---|---|---|---|---:|---:|---:|---:|\n";
  for (const SweepRun& r : runs) {
    const auto& c = r.config;
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {:.1f} |\n", fp8::format_info(c.format).name,
                      fp8::overflow_name(c.policy.overflow), r.nan_encoding_name, fp8::source_name(c.source),
                      fp8::rounding_name(c.rounding), r.result.inputs, r.result.ties.inputs, r.result.mismatches,
                      r.result.seconds);
  }
  for (const SweepRun& r : runs) {
    md += fmt::format("\n## {}\n\n| input class | inputs | mismatches |\n|---|---:|---:|\n", label(r));
    for (fp8::InputClass k : fp8::kInputClasses) {
      const fp8::Tally& t = r.result.by_class[static_cast<std::size_t>(k)];
      md += fmt::format("| {} | {} | {} |\n", fp8::input_class_name(k), t.inputs, t.mismatches);
    }
    md += fmt::format("| (of which exact ties) | {} | {} |\n", r.result.ties.inputs, r.result.ties.mismatches);
    if (r.result.first_mismatches.empty()) continue;
    md += fmt::format("\nFirst {} mismatches, in input order:\n\n", r.result.first_mismatches.size());
    md += "| input (hex) | input | random bits | expected | actual |\n|---|---:|---|---|---|\n";
    for (const fp8::Mismatch& m : r.result.first_mismatches) {
      md += fmt::format("| {} | {} | {} | {} ({}) | {} ({}) |\n", hex(m.input_bits, input_digits(r.config.source)),
                        input_value(r.config.source, m.input_bits),
                        r.config.rounding == fp8::Rounding::Stochastic ? hex(m.random_bits, 8) : "-",
                        hex(m.expected, 2), fp8::decode(r.config.format, m.expected), hex(m.actual, 2),
                        fp8::decode(r.config.format, m.actual));
    }
  }
  return md;
}

}  // namespace lowbit::cli
