#include "lowbit/formats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace lowbit {

std::string_view mismatch_class_name(MismatchClass c) {
  switch (c) {
    case MismatchClass::Tie: return "tie";
    case MismatchClass::NearBoundary: return "near-boundary";
    case MismatchClass::ScalePropagated: return "scale-propagated";
    case MismatchClass::LibraryRounding: return "library-rounding";
    case MismatchClass::Genuine: return "genuine";
  }
  return "?";
}

Explanation explain_neighbours(double y, double lo, double hi) {
  const double boundary = (lo + hi) / 2;  // exact: neighbouring code values are within a binade or two
  if (y == boundary) return {MismatchClass::Tie, 0};
  int e = 0;
  std::frexp(std::fabs(boundary), &e);
  const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return {MismatchClass::NearBoundary, std::fabs(y - boundary) / ulp};
}

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
