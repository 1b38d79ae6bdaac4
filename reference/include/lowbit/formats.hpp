#pragma once
// The format registry: format name -> parameters, reference run (quantize and dequantize),
// mismatch explanation and provenance. conform, golden generate, compare (and later audit and
// verify) all go through it, so adding a format is one registration.
#include <cstdint>
#include <functional>
#include <span>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "lowbit/case.hpp"

namespace lowbit {

enum class MismatchClass { Tie, NearBoundary, ScalePropagated, LibraryRounding, Genuine };
inline constexpr MismatchClass kMismatchClasses[] = {MismatchClass::Tie, MismatchClass::NearBoundary,
                                                     MismatchClass::ScalePropagated, MismatchClass::LibraryRounding,
                                                     MismatchClass::Genuine};
std::string_view mismatch_class_name(MismatchClass c);

struct Explanation {
  MismatchClass cls = MismatchClass::Genuine;
  double boundary_ulps = 0;  // NearBoundary: distance of the quantizer's input from the boundary, binary32 ulps
};

// A mismatch between neighbouring codes whose values are lo < hi: a tie when the quantizer's
// normalized input y lies exactly on their midpoint, else near-boundary with y's distance from it in
// binary32 ulps (at the midpoint's binade).
Explanation explain_neighbours(double y, double lo, double hi);

struct FormatSpec {
  std::string name;         // source.family.variant
  std::string description;
  std::string provenance;   // library, version, file and function the reference reproduces
  nlohmann::json default_params = nlohmann::json::object();
  std::vector<std::string> inputs;   // tensors a case must carry for run()
  std::vector<std::string> optional_inputs;  // tensors run() reads when the case's params ask for them
  std::vector<std::string> outputs;  // tensors run() produces
  std::string default_tolerance = "bit-exact";
  std::string scale_tensor;  // per-block scale, for "propagated from a scale mismatch" (empty: none)

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
};

const std::vector<FormatSpec>& registered_formats();
const FormatSpec* find_format(std::string_view name);
// params = defaults overlaid with the given object; unknown keys are an error naming the format.
nlohmann::json resolve_params(const FormatSpec& f, const nlohmann::json& given);

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
