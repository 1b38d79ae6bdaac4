// Another value of a parameter that picks an implementation of the format: the reference run with
// it (another back end of bitsandbytes' block-wise quantizer, torch's other CPU capabilities, the
// other NaN encodings and widenings of the FP8 casts, the other overflow rules).
#include <fmt/core.h>

#include "variants.hpp"

namespace lowbit::diagnosis {

namespace {

struct KnownValues {
  const char* key;
  std::vector<const char*> values;
  const char* what;  // the parameter in words, for the description
};

// The values the registry's formats take for each such key (docs/formats/*.md: backend in
// bnb-blockwise8.md, cpu_capability in torchao-adam.md and torchao-fp8.md, the FP8 rules in fp8.md).
const std::vector<KnownValues>& known_values() {
  static const std::vector<KnownValues> v = {
      {"backend", {"cpu", "cuda-ieee", "default"}, "back end"},
      {"cpu_capability", {"avx2", "avx512", "default"}, "torch CPU capability"},
      {"overflow", {"satfinite", "nan", "inf"}, "overflow rule"},
      {"nan_encoding", {"torch", "cuda", "ml_dtypes"}, "NaN encoding"},
      {"nan_widening", {"quiet", "c10"}, "NaN widening"},
      {"division", {"ieee", "div-full"}, "COAT division"},
      {"casts", {"gpu", "triton-interpreter"}, "COAT casts"}};
  return v;
}

// What a value means where the name alone does not say it; cpu_capability by what it changes in the
// format (the registry's comments on each: formats_codebook.cpp, formats_coat_fake.cpp, the optimizers')
std::string note(const FormatSpec& f, const std::string& key, const std::string& value) {
  if (key == "cpu_capability" && value == "default") {
    if (f.name == "torchao.fp8")
      return " (torch's scalar kernels: the dequant's NaN where code and scale are both NaN, by the scalar multiply's lanes)";
    if (f.name.starts_with("bnb.blockwise8."))
      return " (torch's scalar kernels: the default back end's NaN absmax of a tail block and its bf16 dequant's NaN)";
    if (f.name == "coat.fake.symm") return " (torch's scalar kernels: RQ = Q * scale's NaN where both are NaN)";
    return " (torch's scalar kernels: multiply-adds not fused)";
  }
  if (key == "backend" && value == "cuda-ieee") return " (the CUDA kernel's search)";
  if (key == "backend" && value == "default") return " (the pure-PyTorch back end)";
  if (key == "division" && value == "div-full") return " (the GPU's div.full.f32: a * rcp.approx(b))";
  return "";
}

}  // namespace

void add_param_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  if (!f.run) return;
  for (const KnownValues& k : known_values()) {
    if (!f.default_params.contains(k.key)) continue;
    for (const char* value : k.values) {
      const std::string key = k.key, val = value;
      out.push_back({key + "=" + val, fmt::format("the reference with {} {}{}", k.what, val, note(f, key, val)),
                     [&f, key, val](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                       if (p.contains(key) && p.at(key) == val) return std::nullopt;  // the case's own: not a variant
                       nlohmann::json q = p;
                       q[key] = val;
                       return with_outputs(e, f.run(e, q, 1));
                     }});
    }
  }
  // An element-wise FP8 cast's overflow rule is its format's name: the casts of the other rules
  const std::string prefix = f.name.substr(0, f.name.rfind('.') + 1);
  if (f.name.starts_with("fp8.") && f.tensor("input") && !f.tensor("scale"))
    for (const FormatSpec& other : registered_formats()) {
      if (other.name == f.name || !other.name.starts_with(prefix) || other.name.size() <= prefix.size() ||
          other.name.find('.', prefix.size()) != std::string::npos)
        continue;
      const std::string rule = other.name.substr(prefix.size());
      out.push_back({"overflow=" + rule, fmt::format("the reference with overflow rule {} ({})", rule, other.name),
                     [&other](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                       return with_outputs(e, other.run(e, p, 1));
                     }});
    }
}

}  // namespace lowbit::diagnosis
