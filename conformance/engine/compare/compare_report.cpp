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
  if (w.cls == MismatchClass::ArithmeticVariant) return fmt::format("arithmetic-variant ({})", w.variant);
  if (w.cls == MismatchClass::Genuine && w.boundary)
    return fmt::format("genuine ({:.3g} ulp from the boundary)", w.boundary_ulps);
  return std::string(mismatch_class_name(w.cls));
}

// What the quantizer saw, where the format records it: "x 0.5, x/s 112.3, boundary 112, scale 0.0044".
std::string context_text(const Explanation& w) {
  std::string out;
  auto add = [&](const char* label, const std::optional<double>& v) {
    if (v) out += fmt::format("{}{} {:.9g}", out.empty() ? "" : ", ", label, *v);
  };
  add("input", w.input);
  add("scaled", w.scaled);
  add("boundary", w.boundary);
  add("scale", w.scale);
  return out;
}

std::string percent(std::uint64_t part, std::uint64_t whole) {
  return whole ? fmt::format("{:.1f} %", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "0 %";
}

bool library_rounding_allowed(const TolerancePolicy& p) { return p.allow_library_rounding && !p.strict; }

}  // namespace

void ComparisonTotals::add(const ComparisonReport& r) {
  for (const TensorComparison& t : r.tensors) {
    elements += t.elements;
    mismatches += t.mismatches;
    allowed += t.allowed;
    for (std::size_t k = 0; k < by_class.size(); ++k) by_class[k] += t.by_class[k];
  }
}

// The denominator is the numeric mismatches: a NaN whose sign or payload differs is no rounding of
// any library, and counting it would understate the share.
std::string library_rounding_text(const ComparisonTotals& t, const TolerancePolicy& p) {
  const std::uint64_t n = t.count(MismatchClass::LibraryRounding), nan = t.count(MismatchClass::NanEncoding);
  const std::uint64_t numeric = t.mismatches - nan;
  return fmt::format("library-rounding: {} of {} {}mismatches ({}{}), {}", n, numeric, nan ? "numeric " : "",
                     percent(n, numeric), nan ? fmt::format("; {} NaN encoding{} apart", nan, nan == 1 ? "" : "s") : "",
                     library_rounding_allowed(p) ? "allowed by the policy" : "not allowed");
}

// JSON keeps its first meaning ("mismatches" all of them, "rate" over them: keys are never redefined)
// and adds the NaN encodings among them
nlohmann::json library_rounding_json(const ComparisonTotals& t, const TolerancePolicy& p) {
  const std::uint64_t n = t.count(MismatchClass::LibraryRounding);
  return {{"count", n},
          {"mismatches", t.mismatches},
          {"nan_encodings", t.count(MismatchClass::NanEncoding)},
          {"rate", t.mismatches ? static_cast<double>(n) / static_cast<double>(t.mismatches) : 0.0},
          {"allowed", library_rounding_allowed(p)}};
}

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
  if (!r.policy.file.empty()) {
    j["policy"]["file"] = r.policy.file;
    j["policy"]["sha256"] = r.policy.file_sha256;
  }
  j["conformant"] = r.conformant;
  j["strict"] = r.policy.strict;
  ComparisonTotals totals;
  totals.add(r);
  j["library_rounding"] = library_rounding_json(totals, r.policy);
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
    tj["max_boundary_ulps"] = t.max_boundary_ulps;
    for (MismatchClass c : kMismatchClasses)
      tj["classes"][std::string(mismatch_class_name(c))] = t.by_class[static_cast<std::size_t>(c)];
    tj["block_size"] = t.block_size;
    if (t.mismatches)
      tj["worst_block"] = {{"index", t.worst_block.index},
                           {"mismatches", t.worst_block.mismatches},
                           {"max_code_distance", t.worst_block.max_code_distance},
                           {"max_ulp_distance", t.worst_block.max_ulp_distance}};
    if (t.propagated) tj["propagated"] = t.propagated;
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
      if (m.why.cls == MismatchClass::NearBoundary || m.why.boundary) mj["boundary_ulps"] = m.why.boundary_ulps;
      if (m.why.cls == MismatchClass::ArithmeticVariant) mj["variant"] = std::string(m.why.variant);
      auto context = [&](const char* key, const std::optional<double>& v) {
        if (v) mj[key] = number(*v);
      };
      context("input", m.why.input);
      context("scaled", m.why.scaled);
      context("boundary", m.why.boundary);
      context("scale", m.why.scale);
      if (m.propagated) mj["propagated"] = m.propagated;
      tj["first_mismatches"].push_back(mj);
    }
    j["tensors"].push_back(tj);
  }
  return j;
}

std::string report_markdown(const ComparisonReport& r) {
  ComparisonTotals totals;
  totals.add(r);
  std::string md = fmt::format("# Comparison: {}{}\n\n", r.conformant ? "conformant" : "NOT conformant",
                               r.policy.strict ? " (strict)" : "");
  md += fmt::format("{} mismatching elements of {} ({} allowed by the policy{}) in {} tensor(s); {}. Format {}; "
                    "tolerance policy {}: {}\n\n",
                    totals.mismatches, totals.elements, totals.allowed,
                    r.policy.strict ? ", none under --strict" : "", r.tensors.size(),
                    library_rounding_text(totals, r.policy),
                    r.format.empty() ? "`(none)`" : markdown_code(r.format), markdown_code(r.policy.name),
                    markdown_text(r.policy.description));
  md += fmt::format("- expected: {}\n- actual: {}\n", markdown_code(r.expected_origin), markdown_code(r.actual_origin));
  if (!r.extra_in_actual.empty()) {
    md += "- tensors only in the actual case (not compared):";
    for (const auto& n : r.extra_in_actual) md += fmt::format(" {}", markdown_code(n));
    md += "\n";
  }
  md += "\n| tensor | dtype | elements | identical | mismatches | allowed | max code distance | max ulp distance |";
  std::string rule = "\n|---|---|---:|---:|---:|---:|---:|---:|";
  for (MismatchClass c : kMismatchClasses) {
    md += fmt::format(" {} |", mismatch_class_name(c));
    rule += "---:|";
  }
  md += rule + "\n";
  for (const TensorComparison& t : r.tensors) {
    if (!t.fault.empty()) {
      md += fmt::format("| {} | {} | {} | **{}** | | | | |", markdown_code(t.name), markdown_text(t.dtype), t.elements,
                        markdown_text(t.fault));
      for (std::size_t k = 0; k < std::size(kMismatchClasses); ++k) md += " |";
      md += "\n";
      continue;
    }
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |", markdown_code(t.name), markdown_text(t.dtype),
                      t.elements, t.identical, t.mismatches, t.allowed, t.max_code_distance, t.max_ulp_distance);
    for (std::uint64_t n : t.by_class) md += fmt::format(" {} |", n);
    md += "\n";
  }
  for (const TensorComparison& t : r.tensors) {
    if (t.first_mismatches.empty()) continue;
    md += fmt::format("\n## {}: first {} of {} mismatches\n\n", markdown_code(t.name), t.first_mismatches.size(),
                      t.mismatches);
    if (t.propagated)
      md += fmt::format("Its {} differing entries are the root cause of {} scale-propagated mismatches in their blocks.\n\n",
                        t.mismatches, t.propagated);
    md += fmt::format("Worst block ({}): block {} with {} mismatches, max code distance {}, "
                      "max ulp distance {}.\n\n",
                      markdown_text(t.layout), t.worst_block.index, t.worst_block.mismatches, t.worst_block.max_code_distance,
                      t.worst_block.max_ulp_distance);
    md += "| index | block | expected | actual | code distance | ulp distance | class | allowed | what the quantizer saw |\n"
          "|---:|---:|---|---|---:|---:|---|---|---|\n";
    for (const MismatchRecord& m : t.first_mismatches)
      md += fmt::format("| {} | {} | {} ({:.9g}) | {} ({:.9g}) | {} | {} | {} | {} | {} |\n", m.index, m.block,
                        hex(m.expected_bits, hex_digits(t.dtype)), m.expected_value,
                        hex(m.actual_bits, hex_digits(t.dtype)), m.actual_value, distance_text(m.code_distance),
                        distance_text(m.ulp_distance), why_text(m.why), m.allowed ? "yes" : "no",
                        m.propagated ? fmt::format("root cause of {} scale-propagated mismatches in its block", m.propagated)
                                     : context_text(m.why));
  }
  return md;
}

}  // namespace lowbit
