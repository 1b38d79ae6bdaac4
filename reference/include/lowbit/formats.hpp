#pragma once
// The format registry: format name -> parameters, tensors and their layouts, reference run (quantize
// and dequantize), mismatch explanation and provenance. conform, golden generate, compare (and later
// audit and verify) all go through it, so adding a format is one registration.
#include <cstdint>
#include <functional>
#include <span>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "lowbit/case.hpp"
#include "lowbit/layout.hpp"
#include "lowbit/mismatch.hpp"

namespace lowbit {

// One tensor of a format, declared once: its name and layout. The tensor schema (dtypes, shape
// relation to the inputs, table size) joins it here, so a format states each tensor in one place.
struct TensorSpec {
  std::string name;
  Layout layout;  // default: not blocked (the whole tensor is block 0, with no per-block entries)

  TensorSpec(std::string n, Layout l = {}) : name(std::move(n)), layout(std::move(l)) {}
  TensorSpec(const char* n, Layout l = {}) : name(n), layout(std::move(l)) {}
  // Reads as its name where code wants one (the lists held names before layouts joined them).
  operator const std::string&() const { return name; }
  friend bool operator==(const TensorSpec& t, std::string_view n) { return t.name == n; }
};

struct FormatSpec {
  std::string name;         // source.family.variant
  std::string description;
  std::string provenance;   // library, version, file and function the reference reproduces
  nlohmann::json default_params = nlohmann::json::object();
  std::vector<TensorSpec> inputs;           // tensors a case must carry for run()
  std::vector<TensorSpec> optional_inputs;  // tensors run() reads when the case's params ask for them
  std::vector<TensorSpec> outputs;          // tensors run() produces
  std::string default_tolerance = "bit-exact";

  // The reference on a case's inputs; params are the case's params over default_params.
  std::function<std::vector<Tensor>(const Case& in, const nlohmann::json& params)> run;
  // Why output `tensor` differs at element i between expected and actual (both cases complete).
  std::function<Explanation(const Case& expected, const Case& actual, const std::string& tensor, std::size_t i)> explain;
  // The dequantized values of the case's quantized state (for inspect's layout-free signature).
  std::function<std::vector<float>(const Case& c)> dequantize;
  // Input tensors other than "input" that golden generate supplies (e.g. the default qmap).
  std::function<std::vector<Tensor>(const nlohmann::json& params)> auxiliary_inputs;
  // Optimizer steps only: the case before a first step on this parameter (grad zero, step 0, fresh
  // moments as the library creates them), for golden generate to run steps from.
  std::function<Case(std::span<const float> param, const nlohmann::json& params)> fresh_state;
  // Inputs aimed at the format's boundaries (TestFloat style) for golden generate.
  std::function<std::vector<float>(const nlohmann::json& params)> edge_inputs;

  // The declaration of a tensor among the inputs, optional inputs and outputs; null when none.
  const TensorSpec* tensor(std::string_view name) const;
};

const std::vector<FormatSpec>& registered_formats();
const FormatSpec* find_format(std::string_view name);
// params = defaults overlaid with the given object; unknown keys are an error naming the format.
nlohmann::json resolve_params(const FormatSpec& f, const nlohmann::json& given);

// The blocks of the case's tensor under its format's declared layout, with the case's params over the
// format's defaults. A tensor the format does not declare, or of an unknown format, is one block.
BlockMap block_map(const Case& c, std::string_view tensor);
BlockMap block_map(const Case& c, const Tensor& tensor);  // tensor: one of c's

// The case's input tensors and metadata with the reference's outputs added (replacing any there).
// Params come from the case's metadata over the format's defaults.
Case run_reference(const FormatSpec& f, const Case& in);

// Registration hooks, one per family (defined beside each family's reference code).
void register_fp8_formats(std::vector<FormatSpec>& out);
void register_codebook_formats(std::vector<FormatSpec>& out);
void register_optimizer_formats(std::vector<FormatSpec>& out);
void register_coat_activation_formats(std::vector<FormatSpec>& out);  // formats_coat_activation.cpp
void register_coat_fake_formats(std::vector<FormatSpec>& out);        // formats_coat_fake.cpp
void register_coat_optimizer_formats(std::vector<FormatSpec>& out);   // formats_coat_optimizer.cpp

}  // namespace lowbit
