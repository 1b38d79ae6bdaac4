#pragma once
// The tensor schema of a format: which dtypes each tensor may have, how its shape relates to the
// case's other tensors and parameters, which tables its codes index, and when an optional tensor is
// required. Every command checks a case against it (validate_case) before any arithmetic, so the
// reference, the dequantizers and the explainers only ever see a consistent case; a violation is a
// CaseError naming the file, the format, the tensor and the rule (docs/adding-a-format.md).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lowbit/dtype.hpp"

namespace lowbit {

class Case;
struct FormatSpec;

// How a tensor's shape relates to the case.
struct ShapeRule {
  enum class Kind {
    Any,           // any shape
    Scalar,        // exactly one element (any rank)
    Entries,       // exactly entries(params) elements (a table: qmap)
    SameShape,     // the shape of `of`
    SameCount,     // as many elements as `of` (any shape: states are stored flat)
    BlockEntries,  // one element per block of `of` under of's declared layout
    Packed,        // ceil(count(of) / 2) elements: two 4-bit codes a byte
    Transposed,    // the shape of `of` (2-D) with its two dimensions swapped
  };
  Kind kind = Kind::Any;
  std::string of;
  std::function<std::uint64_t(const nlohmann::json& params)> entries;
  int rank = -1;  // >= 0: the number of dimensions it must have
  std::string describe() const;  // "as many elements as 'input'", for messages
};

inline ShapeRule any_shape(int rank = -1) { return {ShapeRule::Kind::Any, {}, {}, rank}; }
inline ShapeRule scalar() { return {ShapeRule::Kind::Scalar, {}, {}, -1}; }
inline ShapeRule table_of(std::function<std::uint64_t(const nlohmann::json&)> entries) {
  return {ShapeRule::Kind::Entries, {}, std::move(entries), 1};
}
inline ShapeRule table_of(std::uint64_t entries) {
  return table_of([entries](const nlohmann::json&) { return entries; });
}
inline ShapeRule same_shape(std::string of) { return {ShapeRule::Kind::SameShape, std::move(of), {}, -1}; }
inline ShapeRule same_count(std::string of) { return {ShapeRule::Kind::SameCount, std::move(of), {}, -1}; }
inline ShapeRule entry_per_block_of(std::string of) { return {ShapeRule::Kind::BlockEntries, std::move(of), {}, -1}; }
inline ShapeRule packed_pairs_of(std::string of) { return {ShapeRule::Kind::Packed, std::move(of), {}, 1}; }
inline ShapeRule transposed_of(std::string of) { return {ShapeRule::Kind::Transposed, std::move(of), {}, 2}; }

struct Schema {
  // Default member initializers let a format name only the fields it sets ({.dtypes = ..., .shape = ...}).
  std::vector<DType> dtypes = {};  // the dtypes it may have; empty: any
  ShapeRule shape = {};
  std::string dtype_of = {};       // when set: the same dtype as this tensor (param.next as param)
  std::string indexes = {};        // when set: every element is an index into this table (< its element count)
  std::string required_when = {};  // an optional input: required when this boolean parameter is true
};

// What validate_case requires of a case.
enum class CaseScope {
  Inputs,    // every input run() reads (optional ones when their parameter asks): the reference may run
  Complete,  // the inputs and every output: a golden case, or one the explainers and dequantizers read
  Present,   // only the declared tensors it has (a kernel's output, a partial case)
};

// Checks the case's params (known to the format, each of its default's JSON type) and, for the
// tensors the scope asks for and every other declared tensor present, presence, dtype, shape and
// indices. Throws CaseError "<file>: format F, tensor 'T': <rule>". Rules that relate to a tensor
// the case lacks are skipped in scope Present.
void validate_case(const FormatSpec& f, const Case& c, CaseScope scope);

// The declared tensors the scope asks for that the case lacks (empty: none).
std::vector<std::string> missing_tensors(const FormatSpec& f, const Case& c, CaseScope scope);

}  // namespace lowbit
