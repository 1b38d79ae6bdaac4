#include "lowbit/formats.hpp"

#include <stdexcept>

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

nlohmann::json resolve_params(const FormatSpec& f, const nlohmann::json& given) {
  nlohmann::json p = f.default_params;
  for (const auto& [key, value] : given.items()) {
    if (!p.contains(key)) throw std::runtime_error("format " + f.name + " has no parameter '" + key + "'");
    p[key] = value;
  }
  return p;
}

Case run_reference(const FormatSpec& f, const Case& in) {
  Case out;
  out.origin = "reference " + f.name;
  out.metadata = in.metadata;
  for (const std::string& name : f.inputs) out.add(in.require(name));
  for (const std::string& name : f.optional_inputs)
    if (const Tensor* t = in.find(name)) out.add(*t);
  const nlohmann::json params = resolve_params(f, in.params());
  for (Tensor& t : f.run(out, params)) out.add(std::move(t));
  return out;
}

}  // namespace lowbit
