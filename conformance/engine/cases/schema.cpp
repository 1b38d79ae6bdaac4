#include "lowbit/schema.hpp"

#include <cmath>

#include "lowbit/case.hpp"
#include "lowbit/formats.hpp"

namespace lowbit {

namespace {

[[noreturn]] void fail(const FormatSpec& f, const Case& c, const std::string& tensor, const std::string& rule) {
  throw CaseError(c.origin + ": format " + f.name + ", tensor '" + tensor + "': " + rule);
}

// A parameter's value must have the JSON type of its default (an integer where the default is one,
// a finite number where it is a number), so the reference never reads 2.5 or "256" as a block size.
bool same_kind(const nlohmann::json& value, const nlohmann::json& default_value) {
  if (default_value.is_boolean()) return value.is_boolean();
  if (default_value.is_string()) return value.is_string();
  if (default_value.is_number_integer()) return value.is_number_integer();
  if (default_value.is_number()) return value.is_number() && std::isfinite(value.get<double>());
  return true;
}

std::string kind_name(const nlohmann::json& default_value) {
  if (default_value.is_boolean()) return "true or false";
  if (default_value.is_string()) return "a string";
  if (default_value.is_number_integer()) return "an integer";
  return "a finite number";
}

nlohmann::json checked_params(const FormatSpec& f, const Case& c) {
  const nlohmann::json given = c.params();  // a JSON object; CaseError naming the file otherwise
  for (const auto& [key, value] : given.items()) {
    if (!f.default_params.contains(key)) {
      std::string known;
      for (const auto& [k, v] : f.default_params.items()) known += (known.empty() ? "" : ", ") + k;
      throw CaseError(c.origin + ": format " + f.name + " has no parameter '" + key + "' (its parameters: " +
                      (known.empty() ? "none" : known) + ")");
    }
    const nlohmann::json& d = f.default_params.at(key);
    if (!same_kind(value, d))
      throw CaseError(c.origin + ": format " + f.name + ", parameter '" + key + "' must be " + kind_name(d) + " (got " +
                      value.dump() + ")");
  }
  nlohmann::json params = resolve_params(f, given);
  // the block extents the layouts take from params (block_size, group_size, ...): whole numbers in range
  for (const auto* list : {&f.inputs, &f.optional_inputs, &f.outputs})
    for (const TensorSpec& t : *list)
      for (const Extent* e : {&t.layout.rows, &t.layout.columns}) {
        if (e->param.empty()) continue;
        try {
          extent_param(*e, params);
        } catch (const std::invalid_argument& x) {
          throw CaseError(c.origin + ": format " + f.name + ", params: " + x.what());
        }
      }
  return params;
}

std::string dtype_list(const std::vector<DType>& dtypes) {
  std::string s;
  for (DType d : dtypes) s += (s.empty() ? "" : " or ") + std::string(dtype_name(d));
  return s;
}

// The element count `rule` asks of a tensor, or nothing when it relates to a tensor the case lacks.
void check_shape(const FormatSpec& f, const Case& c, const Tensor& t, const ShapeRule& rule, const nlohmann::json& params) {
  if (rule.rank >= 0 && t.shape.size() != static_cast<std::size_t>(rule.rank))
    fail(f, c, t.name, "must have " + std::to_string(rule.rank) + " dimension(s), has shape " + shape_text(t.shape));
  const std::uint64_t n = t.element_count();
  const Tensor* other = rule.of.empty() ? nullptr : c.find(rule.of);
  if (!rule.of.empty() && !other) return;  // a rule about a tensor the case does not hold
  std::uint64_t want = n;
  switch (rule.kind) {
    case ShapeRule::Kind::Any: return;
    case ShapeRule::Kind::Scalar: want = 1; break;
    case ShapeRule::Kind::Entries: want = rule.entries(params); break;
    case ShapeRule::Kind::SameShape:
      if (t.shape != other->shape)
        fail(f, c, t.name, "has shape " + shape_text(t.shape) + ", but " + rule.describe() + " " + shape_text(other->shape));
      return;
    case ShapeRule::Kind::Transposed:
      if (other->shape.size() != 2 || t.shape != std::vector<std::int64_t>{other->shape[1], other->shape[0]})
        fail(f, c, t.name, "has shape " + shape_text(t.shape) + ", but " + rule.describe() + " " + shape_text(other->shape));
      return;
    case ShapeRule::Kind::SameCount: want = other->element_count(); break;
    case ShapeRule::Kind::BlockEntries: want = block_map(c, *other).blocks; break;
    case ShapeRule::Kind::Packed: want = (other->element_count() + 1) / 2; break;
  }
  if (n != want)
    fail(f, c, t.name, "has " + std::to_string(n) + " element(s), but must have " + std::to_string(want) + " (" +
                           rule.describe() + ")");
}

// Codes that index a table must stay inside it (a 4-bit state's codes below 16).
void check_indices(const FormatSpec& f, const Case& c, const Tensor& t, const std::string& table_name) {
  const Tensor* table = c.find(table_name);
  if (!table) return;
  const std::uint64_t entries = table->element_count();
  for (std::size_t i = 0; i < t.element_count(); ++i)
    if (t.bits_at(i) >= entries)
      fail(f, c, t.name, "element " + std::to_string(i) + " is code " + std::to_string(t.bits_at(i)) + ", outside table '" +
                             table_name + "' of " + std::to_string(entries) + " entries");
}

void check_tensor(const FormatSpec& f, const Case& c, const Tensor& t, const Schema& s, const nlohmann::json& params) {
  if (!s.dtypes.empty() && std::find(s.dtypes.begin(), s.dtypes.end(), t.dtype) == s.dtypes.end())
    fail(f, c, t.name, "has dtype " + std::string(dtype_name(t.dtype)) + ", must be " + dtype_list(s.dtypes));
  if (!s.dtype_of.empty())
    if (const Tensor* like = c.find(s.dtype_of); like && like->dtype != t.dtype)
      fail(f, c, t.name, "has dtype " + std::string(dtype_name(t.dtype)) + ", must be that of '" + s.dtype_of + "' (" +
                             std::string(dtype_name(like->dtype)) + ")");
  check_shape(f, c, t, s.shape, params);
}

bool asked_for(const TensorSpec& t, const nlohmann::json& params) {
  if (t.schema.required_when.empty()) return true;
  const nlohmann::json& flag = params.at(t.schema.required_when);
  return flag.is_boolean() && flag.get<bool>();
}

std::vector<std::string> missing(const FormatSpec& f, const Case& c, CaseScope scope, const nlohmann::json& params) {
  std::vector<std::string> out;
  if (scope == CaseScope::Present) return out;
  auto need = [&](const TensorSpec& t) {
    if (!c.find(t.name)) out.push_back(t.name);
  };
  for (const TensorSpec& t : f.inputs) need(t);
  for (const TensorSpec& t : f.optional_inputs)
    if (!t.schema.required_when.empty() && asked_for(t, params)) need(t);
  if (scope == CaseScope::Complete)
    for (const TensorSpec& t : f.outputs) need(t);
  return out;
}

}  // namespace

std::string ShapeRule::describe() const {
  switch (kind) {
    case Kind::Any: return "any shape";
    case Kind::Scalar: return "one value";
    case Kind::Entries: return "the table's size";
    case Kind::SameShape: return "'" + of + "' has";
    case Kind::Transposed: return "it must be the transpose of '" + of + "', which has";
    case Kind::SameCount: return "as many as '" + of + "'";
    case Kind::BlockEntries: return "one per block of '" + of + "'";
    case Kind::Packed: return "two elements of '" + of + "' a byte";
  }
  return "";
}

std::vector<std::string> missing_tensors(const FormatSpec& f, const Case& c, CaseScope scope) {
  return missing(f, c, scope, checked_params(f, c));
}

void validate_case(const FormatSpec& f, const Case& c, CaseScope scope) {
  const nlohmann::json params = checked_params(f, c);
  if (const auto absent = missing(f, c, scope, params); !absent.empty())
    fail(f, c, absent.front(), "is missing (the format's " +
                                   std::string(scope == CaseScope::Complete ? "inputs and outputs" : "inputs") +
                                   " must all be present)");
  for (const auto* list : {&f.inputs, &f.optional_inputs, &f.outputs})
    for (const TensorSpec& spec : *list)
      if (const Tensor* t = c.find(spec.name)) check_tensor(f, c, *t, spec.schema, params);
  // indices last, once every table has passed its own size rule
  for (const auto* list : {&f.inputs, &f.optional_inputs, &f.outputs})
    for (const TensorSpec& spec : *list)
      if (const Tensor* t = c.find(spec.name); t && !spec.schema.indexes.empty()) check_indices(f, c, *t, spec.schema.indexes);
}

}  // namespace lowbit
