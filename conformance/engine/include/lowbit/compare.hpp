#pragma once
// The comparison engine: an expected case against an actual one, tensor by tensor, bit for bit.
// Every mismatch gets its code distance (in code order), the ulp distance of the (dequantized)
// binary32 values, a class (tie, near a rounding boundary, propagated from a scale mismatch,
// genuine) and a verdict under the tolerance policy. Rendered as JSON (docs/tolerance-policy.md
// gives the schema) and as Markdown for a pull request.
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lowbit/case.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/tolerance.hpp"

namespace lowbit {

struct MismatchRecord {
  std::size_t index = 0;
  std::size_t block = 0;  // in the numbering of the per-block tensors (element j of a scale is block j)
  std::uint64_t expected_bits = 0, actual_bits = 0;
  double expected_value = 0, actual_value = 0;  // decoded (codes) or the values themselves (floats)
  std::uint64_t code_distance = 0;              // in code order (codes, integers); 0 for float tensors
  std::uint64_t ulp_distance = 0;               // binary32 ulps between the values; UINT64_MAX when a NaN is involved
  Explanation why;
  bool allowed = false;
  // A per-block entry (scale, expand, centre) that differs: the mismatches of its block in the tensors
  // it scales, scale-propagated from it (it is their root cause, reported once here)
  std::uint64_t propagated = 0;
};

struct BlockStats {
  std::size_t index = 0;
  std::uint64_t mismatches = 0;
  std::uint64_t max_code_distance = 0;
  std::uint64_t max_ulp_distance = 0;
};

struct TensorComparison {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::string fault;  // non-empty: not comparable (missing, other dtype or shape)
  std::uint64_t elements = 0, identical = 0, mismatches = 0, allowed = 0;
  std::uint64_t max_code_distance = 0, max_ulp_distance = 0;
  // The farthest a mismatch the explainer put near a rounding boundary lay from it, in binary32 ulps,
  // whatever the policy's budget: the smallest budget under which all of them would be near-boundary
  // (a measured budget, e.g. for bitsandbytes' fast-math CUDA kernels)
  double max_boundary_ulps = 0;
  std::array<std::uint64_t, std::size(kMismatchClasses)> by_class{};  // indexed by MismatchClass
  std::size_t block_size = 0;  // elements in a full block of the tensor's declared layout
  std::string layout;          // the blocks in words ("128x128 tiles"), for the Markdown report
  BlockStats worst_block;
  std::vector<MismatchRecord> first_mismatches;
  std::uint64_t propagated = 0;  // a per-block tensor: the scale-propagated mismatches its differing entries caused
};

struct ComparisonReport {
  std::string expected_origin, actual_origin, format;
  TolerancePolicy policy;
  std::vector<TensorComparison> tensors;
  std::vector<std::string> extra_in_actual;
  bool conformant = true;
};

// Totals over the tensors of one or more reports (verify and conform add up their cases').
struct ComparisonTotals {
  std::uint64_t elements = 0, mismatches = 0, allowed = 0;
  std::array<std::uint64_t, std::size(kMismatchClasses)> by_class{};
  void add(const ComparisonReport& r);
  std::uint64_t count(MismatchClass c) const { return by_class[static_cast<std::size_t>(c)]; }
};
// The share of the numeric mismatches (NaN-encoding differences apart) that library-rounding explains,
// printed next to every verdict: a kernel with many of them deserves a look even where the policy
// allows them. Text: "library-rounding: 428 of 606 mismatches (70.6 %), allowed by the policy", or with
// NaN encodings "... 428 of 606 numeric mismatches (70.6 %; 12 NaN encodings apart), ...". JSON:
// {"count", "mismatches" (all, NaN encodings included), "nan_encodings", "rate" (count / mismatches,
// 0 without any), "allowed"}: the keys' first meaning, kept.
std::string library_rounding_text(const ComparisonTotals& t, const TolerancePolicy& p);
nlohmann::json library_rounding_json(const ComparisonTotals& t, const TolerancePolicy& p);

// Compares every tensor of `expected` with the same-named tensor of `actual`.
ComparisonReport compare_cases(const Case& expected, const Case& actual, const TolerancePolicy& policy,
                               std::size_t max_listed = 20);

nlohmann::json report_json(const ComparisonReport& r);
std::string report_markdown(const ComparisonReport& r);

}  // namespace lowbit
