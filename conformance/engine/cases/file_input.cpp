#include "lowbit/file_input.hpp"

#include <stdexcept>

#include "lowbit/float_bits.hpp"
#include "lowbit/manifest.hpp"

namespace lowbit {

namespace {

std::string tensor_names(const Case& c) {
  std::string names;
  for (const Tensor& t : c.tensors()) names += (names.empty() ? "" : ", ") + t.name;
  return names.empty() ? "none" : names;
}

}  // namespace

bool is_file_spec(const std::string& text) { return text.rfind("file:", 0) == 0; }

InputSpec parse_file_spec(const std::string& text) {
  InputSpec s;
  s.text = text;
  s.kind = "file";
  std::string rest = text.substr(5);
  const auto colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find('/', colon) == std::string::npos) {
    const std::string tensor = rest.substr(colon + 1);
    if (tensor.empty()) throw std::invalid_argument("input spec '" + text + "': empty tensor name after ':'");
    s.args["tensor"] = tensor;
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) throw std::invalid_argument("input spec '" + text + "': file: needs a path (file:PATH[:TENSOR])");
  s.args["path"] = rest;
  return s;
}

Case read_file_input(const InputSpec& spec) {
  const std::string& path = spec.args.at("path");
  // the cap from the header, before a byte of data is read (a 2^29-element file took 4.2 GB and 22 s
  // to be refused after the whole read)
  const Case header = read_case_header(path);
  for (const Tensor& t : header.tensors())
    if (t.element_count() > static_cast<std::uint64_t>(kMaxCount))
      throw std::invalid_argument("input spec '" + spec.text + "': tensor '" + t.name + "' of " + path + " has " +
                                  std::to_string(t.element_count()) + " elements, more than 2^28");
  // through the manifest check every reader of a case file goes through: a golden file that
  // disagrees with its MANIFEST.json is refused here too
  return read_case_guarded(path);
}

Tensor file_input_tensor(const InputSpec& spec) {
  const Case c = read_file_input(spec);
  const std::string& path = spec.args.at("path");
  const Tensor* chosen = nullptr;
  if (const auto named = spec.args.find("tensor"); named != spec.args.end()) {
    chosen = c.find(named->second);
    if (!chosen)
      throw std::invalid_argument("input spec '" + spec.text + "': " + path + " has no tensor '" + named->second +
                                  "' (it has: " + tensor_names(c) + ")");
  } else if (c.tensors().size() == 1) {
    chosen = &c.tensors().front();
  } else {
    chosen = c.find("input");
    if (!chosen)
      throw std::invalid_argument("input spec '" + spec.text + "': " + path + " holds " + std::to_string(c.tensors().size()) +
                                  " tensors and none is 'input': name one as file:PATH:TENSOR (it has: " +
                                  tensor_names(c) + ")");
  }
  if (chosen->element_count() > static_cast<std::uint64_t>(kMaxCount))
    throw std::invalid_argument("input spec '" + spec.text + "': tensor '" + chosen->name + "' has " +
                                std::to_string(chosen->element_count()) + " elements, more than 2^28");
  Tensor t = *chosen;
  t.name = "input";
  return t;
}

std::vector<float> file_input_values(const InputSpec& spec) {
  const Tensor t = file_input_tensor(spec);
  switch (t.dtype) {
    case DType::F32: return t.f32();
    case DType::BF16:
    case DType::F16: {
      std::vector<float> out;
      out.reserve(t.element_count());
      for (std::uint16_t h : t.u16()) out.push_back(t.dtype == DType::BF16 ? widen_bf16(h) : widen_f16(h));
      return out;
    }
    default:
      throw std::invalid_argument("input spec '" + spec.text + "': tensor has dtype " + std::string(dtype_name(t.dtype)) +
                                  "; values are taken from F32, BF16 or F16 tensors");
  }
}

}  // namespace lowbit
