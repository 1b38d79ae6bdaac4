// Rendering of a ComparisonReport: JSON (schema in docs/tolerance-policy.md) and Markdown that
// reads well in a pull request. Everything a file or a user supplied (tensor names, dtypes, origins,
// format, policy, faults) reaches the Markdown through markdown_code / markdown_text, so a hostile
// name keeps every table row's columns and injects no markup.
#include <fmt/core.h>

#include <cmath>
#include <limits>

#include "lowbit/compare.hpp"
#include "lowbit/printable.hpp"

namespace lowbit {

namespace {

constexpr std::uint64_t kNoDistance = std::numeric_limits<std::uint64_t>::max();

int hex_digits(const std::string& dtype) {
  const auto d = parse_dtype(dtype);
  return d ? static_cast<int>(2 * dtype_size(*d)) : 16;
}

std::string hex(std::uint64_t bits, int digits) { return fmt::format("0x{:0{}x}", bits, digits); }

nlohmann::json number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v < 0 ? "-inf" : "inf");
}

nlohmann::json distance(std::uint64_t d) { return d == kNoDistance ? nlohmann::json("nan") : nlohmann::json(d); }
std::string distance_text(std::uint64_t d) { return d == kNoDistance ? "n/a (NaN)" : std::to_string(d); }

std::string why_text(const Explanation& w) {
  if (w.cls == MismatchClass::NearBoundary) return fmt::format("near-boundary ({:.3g} ulp)", w.boundary_ulps);
  return std::string(mismatch_class_name(w.cls));
}

}  // namespace

nlohmann::json report_json(const ComparisonReport& r) {
  nlohmann::json j;
  j["expected"] = r.expected_origin;
  j["actual"] = r.actual_origin;
  j["format"] = r.format;
  j["policy"] = {{"name", r.policy.name},
                 {"description", r.policy.description},
                 {"allow_ties", r.policy.allow_ties},
                 {"boundary_ulps", r.policy.boundary_ulps},
                 {"allow_scale_propagated", r.policy.allow_scale_propagated},
                 {"allow_library_rounding", r.policy.allow_library_rounding}};
  j["conformant"] = r.conformant;
  j["extra_in_actual"] = r.extra_in_actual;
  j["tensors"] = nlohmann::json::array();
  for (const TensorComparison& t : r.tensors) {
    nlohmann::json tj = {{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}, {"elements", t.elements}};
    if (!t.fault.empty()) {
      tj["fault"] = t.fault;
      j["tensors"].push_back(tj);
      continue;
    }
    tj["identical"] = t.identical;
    tj["mismatches"] = t.mismatches;
    tj["allowed"] = t.allowed;
    tj["max_code_distance"] = t.max_code_distance;
    tj["max_ulp_distance"] = t.max_ulp_distance;
    for (MismatchClass c : kMismatchClasses)
      tj["classes"][std::string(mismatch_class_name(c))] = t.by_class[static_cast<std::size_t>(c)];
    tj["block_size"] = t.block_size;
    if (t.mismatches)
      tj["worst_block"] = {{"index", t.worst_block.index},
                           {"mismatches", t.worst_block.mismatches},
                           {"max_code_distance", t.worst_block.max_code_distance},
                           {"max_ulp_distance", t.worst_block.max_ulp_distance}};
    tj["first_mismatches"] = nlohmann::json::array();
    for (const MismatchRecord& m : t.first_mismatches) {
      nlohmann::json mj = {{"index", m.index},
                           {"block", m.block},
                           {"expected", hex(m.expected_bits, hex_digits(t.dtype))},
                           {"actual", hex(m.actual_bits, hex_digits(t.dtype))},
                           {"expected_value", number(m.expected_value)},
                           {"actual_value", number(m.actual_value)},
                           {"code_distance", distance(m.code_distance)},
                           {"ulp_distance", distance(m.ulp_distance)},
                           {"class", mismatch_class_name(m.why.cls)},
                           {"allowed", m.allowed}};
      if (m.why.cls == MismatchClass::NearBoundary) mj["boundary_ulps"] = m.why.boundary_ulps;
      tj["first_mismatches"].push_back(mj);
    }
    j["tensors"].push_back(tj);
  }
  return j;
}

std::string report_markdown(const ComparisonReport& r) {
  std::uint64_t mismatches = 0, allowed = 0, elements = 0;
  for (const TensorComparison& t : r.tensors) {
    mismatches += t.mismatches;
    allowed += t.allowed;
    elements += t.elements;
  }
  std::string md = fmt::format("# Comparison: {}\n\n", r.conformant ? "conformant" : "NOT conformant");
  md += fmt::format("{} mismatching elements of {} ({} allowed by the policy) in {} tensor(s). Format {}; "
                    "tolerance policy {}: {}\n\n",
                    mismatches, elements, allowed, r.tensors.size(),
                    r.format.empty() ? "`(none)`" : markdown_code(r.format), markdown_code(r.policy.name),
                    markdown_text(r.policy.description));
  md += fmt::format("- expected: {}\n- actual: {}\n", markdown_code(r.expected_origin), markdown_code(r.actual_origin));
  if (!r.extra_in_actual.empty()) {
    md += "- tensors only in the actual case (not compared):";
    for (const auto& n : r.extra_in_actual) md += fmt::format(" {}", markdown_code(n));
    md += "\n";
  }
  md += "\n| tensor | dtype | elements | identical | mismatches | allowed | max code distance | max ulp distance | "
        "tie | near-boundary | scale-propagated | library-rounding | genuine |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const TensorComparison& t : r.tensors) {
    if (!t.fault.empty()) {
      md += fmt::format("| {} | {} | {} | **{}** | | | | | | | | | |\n", markdown_code(t.name), markdown_text(t.dtype),
                        t.elements, markdown_text(t.fault));
      continue;
    }
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", markdown_code(t.name),
                      markdown_text(t.dtype),
                      t.elements, t.identical, t.mismatches, t.allowed, t.max_code_distance, t.max_ulp_distance,
                      t.by_class[0], t.by_class[1], t.by_class[2], t.by_class[3], t.by_class[4]);
  }
  for (const TensorComparison& t : r.tensors) {
    if (t.first_mismatches.empty()) continue;
    md += fmt::format("\n## {}: first {} of {} mismatches\n\n", markdown_code(t.name), t.first_mismatches.size(),
                      t.mismatches);
    md += fmt::format("Worst block ({}): block {} with {} mismatches, max code distance {}, "
                      "max ulp distance {}.\n\n",
                      markdown_text(t.layout), t.worst_block.index, t.worst_block.mismatches, t.worst_block.max_code_distance,
                      t.worst_block.max_ulp_distance);
    md += "| index | block | expected | actual | code distance | ulp distance | class | allowed |\n"
          "|---:|---:|---|---|---:|---:|---|---|\n";
    for (const MismatchRecord& m : t.first_mismatches)
      md += fmt::format("| {} | {} | {} ({:.9g}) | {} ({:.9g}) | {} | {} | {} | {} |\n", m.index, m.block,
                        hex(m.expected_bits, hex_digits(t.dtype)), m.expected_value,
                        hex(m.actual_bits, hex_digits(t.dtype)), m.actual_value, distance_text(m.code_distance),
                        distance_text(m.ulp_distance), why_text(m.why), m.allowed ? "yes" : "no");
  }
  return md;
}

}  // namespace lowbit
