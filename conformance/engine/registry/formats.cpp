#include "lowbit/formats.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "lowbit/sha256.hpp"

namespace lowbit {

const std::vector<FormatSpec>& registered_formats() {
  static const std::vector<FormatSpec> formats = [] {
    std::vector<FormatSpec> f;
    register_fp8_formats(f);
    register_codebook_formats(f);
    register_optimizer_formats(f);
    register_coat_activation_formats(f);
    register_coat_fake_formats(f);
    register_coat_optimizer_formats(f);
    return f;
  }();
  return formats;
}

const FormatSpec* find_format(std::string_view name) {
  for (const FormatSpec& f : registered_formats())
    if (f.name == name) return &f;
  return nullptr;
}

const TensorSpec* FormatSpec::tensor(std::string_view tensor_name) const {
  for (const auto* list : {&inputs, &optional_inputs, &outputs})
    for (const TensorSpec& t : *list)
      if (t.name == tensor_name) return &t;
  return nullptr;
}

BlockMap block_map(const Case& c, std::string_view tensor) { return block_map(c, c.require(tensor)); }

BlockMap block_map(const Case& c, const Tensor& t) {
  const FormatSpec* f = find_format(c.format());
  const TensorSpec* spec = f ? f->tensor(t.name) : nullptr;
  if (!spec) return resolve_layout(Layout{}, t.shape, nlohmann::json::object());
  const nlohmann::json given = c.params();
  try {
    return resolve_layout(spec->layout, t.shape, resolve_params(*f, given));
  } catch (const std::exception& e) {  // an unknown or malformed parameter: name the file
    throw CaseError(c.origin + ": format " + f->name + ", tensor '" + t.name + "': " + e.what());
  }
}

std::string BlockSizes::refusal(std::size_t block_size) const {
  const bool whole = !power_of_two || (block_size != 0 && (block_size & (block_size - 1)) == 0);
  return block_size >= min && block_size <= max && whole ? std::string() : why_not;
}

bool format_matches(std::string_view glob, std::string_view name) {
  return fnmatch(std::string(glob).c_str(), std::string(name).c_str(), 0) == 0;
}

std::vector<const FormatSpec*> select_formats(const std::vector<std::string>& globs,
                                              const std::function<bool(const FormatSpec&)>& has_hook) {
  std::vector<const FormatSpec*> candidates, out;
  for (const FormatSpec& f : registered_formats())
    if (has_hook(f)) candidates.push_back(&f);
  std::string unmatched;
  for (const std::string& g : globs) {
    const bool any = std::any_of(candidates.begin(), candidates.end(),
                                 [&](const FormatSpec* f) { return format_matches(g, f->name); });
    if (!any) unmatched += (unmatched.empty() ? "'" : ", '") + g + "'";
  }
  if (!unmatched.empty()) {
    std::string known;
    for (const FormatSpec* f : candidates) known += (known.empty() ? "" : ", ") + f->name;
    throw std::invalid_argument("no format matches " + unmatched + " (formats here: " + known + ")");
  }
  for (const FormatSpec* f : candidates)
    if (globs.empty() || std::any_of(globs.begin(), globs.end(), [&](const std::string& g) { return format_matches(g, f->name); }))
      out.push_back(f);
  return out;
}

std::size_t positive_size_param(const nlohmann::json& params, const char* key) {
  return static_cast<std::size_t>(extent_param(param_extent(key), params));  // the layouts' own rule and message
}

nlohmann::json resolve_params(const FormatSpec& f, const nlohmann::json& given) {
  nlohmann::json p = f.default_params;
  for (const auto& [key, value] : given.items()) {
    if (!p.contains(key)) throw std::runtime_error("format " + f.name + " has no parameter '" + key + "'");
    p[key] = value;
  }
  return p;
}

namespace {

// A format hook's result; its errors as CaseErrors naming the case's file and the format (a
// precondition of the arithmetic, e.g. COAT's divisibility rules), those that name it already as they are.
template <class Hook>
auto naming_the_case(const FormatSpec& f, const Case& c, Hook hook) {
  try {
    return hook();
  } catch (const CaseError&) {
    throw;
  } catch (const std::exception& e) {
    throw CaseError(c.origin + ": format " + f.name + ": " + e.what());
  }
}

}  // namespace

int worth_threads(std::size_t elements, int threads) {
  if (threads < 1) throw std::invalid_argument("thread count must be at least 1 (got " + std::to_string(threads) + ")");
  return elements < (std::size_t{1} << 16) ? 1 : threads;
}

Case run_reference(const FormatSpec& f, const Case& in, int threads) {
  validate_case(f, in, CaseScope::Inputs);
  Case out;
  out.origin = in.origin;  // the run's own errors name the case's file
  out.metadata = in.metadata;
  for (const std::string& name : f.inputs) out.add(in.require(name));
  for (const std::string& name : f.optional_inputs)
    if (const Tensor* t = in.find(name)) out.add(*t);
  const nlohmann::json params = resolve_params(f, in.params());
  for (Tensor& t : naming_the_case(f, in, [&] { return f.run(out, params, threads); })) out.add(std::move(t));
  out.origin = "reference " + f.name;
  return out;
}

DequantizedState dequantized_state(const FormatSpec& f, const Case& c) {
  validate_case(f, c, CaseScope::Present);
  if (!f.dequantize) return {{}, "format " + f.name + " has no dequantizer"};
  for (const std::string& name : f.dequantize_reads)
    if (!c.find(name)) return {{}, "tensor '" + name + "' is missing"};
  return {naming_the_case(f, c, [&] { return f.dequantize(c, resolve_params(f, c.params())); }), {}};
}

std::string dequantized_signature(std::span<const float> values) {
  static_assert(std::endian::native == std::endian::little, "the signature hashes little-endian float32 bytes");
  return sha256_hex({reinterpret_cast<const std::uint8_t*>(values.data()), values.size_bytes()});
}

Case advanced_state(const Case& done) {
  Case next;
  for (const Tensor& t : done.tensors())
    if (!t.name.ends_with(".next") && !done.find(t.name + ".next")) next.add(t);
  for (const Tensor& t : done.tensors()) {
    if (!t.name.ends_with(".next")) continue;
    Tensor renamed = t;
    renamed.name = t.name.substr(0, t.name.size() - 5);
    next.add(std::move(renamed));
  }
  if (!done.find("step.next")) {
    std::vector<std::int64_t> step = done.require("step").i64();
    step[0] += 1;
    next.add(Tensor::from_i64("step", done.require("step").shape, step));
  }
  return next;
}

}  // namespace lowbit
