#pragma once
// The format registry: format name -> parameters, tensors and their layouts, reference run (quantize
// and dequantize), mismatch explanation, provenance, and the hooks of the audit and the trajectory
// study. conform, golden generate, compare, audit and audit --trajectory all go through it, so adding
// a format is one registration (docs/adding-a-format.md).
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
#include "lowbit/schema.hpp"

namespace lowbit {

// One tensor of a format, declared once: its name, layout and schema (dtypes, shape relation to the
// case's other tensors, the table its codes index), so a format states each tensor in one place.
struct TensorSpec {
  std::string name;
  Layout layout;  // default: not blocked (the whole tensor is block 0, with no per-block entries)
  Schema schema;  // default: any dtype and shape (every registered format declares its own)

  TensorSpec(std::string n, Layout l = {}, Schema s = {}) : name(std::move(n)), layout(std::move(l)), schema(std::move(s)) {}
  TensorSpec(const char* n, Layout l = {}, Schema s = {}) : name(n), layout(std::move(l)), schema(std::move(s)) {}
  TensorSpec(std::string n, Schema s) : name(std::move(n)), schema(std::move(s)) {}
  TensorSpec(const char* n, Schema s) : name(n), schema(std::move(s)) {}
  // Reads as its name where code wants one (the lists held names before layouts joined them).
  operator const std::string&() const { return name; }
  friend bool operator==(const TensorSpec& t, std::string_view n) { return t.name == n; }
};

// The block sizes a format quantizes with: [min, max], powers of two only if power_of_two. Outside
// them the audit reports `why_not` ("n/a (COAT groups are 128)").
struct BlockSizes {
  std::size_t min = 1, max = SIZE_MAX;
  bool power_of_two = false;
  std::string why_not;
  // Empty when block_size is supported, else why_not.
  std::string refusal(std::size_t block_size) const;
};

// The smallest whole piece of a 2-D format's input (FormatSpec::input_tile): rows x cols, and the
// shape rule it stands for in words, for the errors of an input that cannot be shaped.
struct InputTile {
  std::int64_t rows = 1, cols = 1;
  std::string rule;  // "M % 32 == 0 and N % 64 == 0 (group_size 16)"
};

// Why element i of one output tensor differs, in one comparison (FormatSpec::explain makes it).
using ElementExplainer = std::function<Explanation(std::size_t i)>;

struct FormatSpec {
  std::string name;         // source.family.variant
  std::string description;
  std::string provenance;   // library, version, file and function the reference reproduces
  nlohmann::json default_params = nlohmann::json::object();
  std::vector<TensorSpec> inputs;           // tensors a case must carry for run()
  std::vector<TensorSpec> optional_inputs;  // tensors run() reads when the case's params ask for them
  std::vector<TensorSpec> outputs;          // tensors run() produces
  std::string default_tolerance = "bit-exact";

  // The reference on a case's inputs; params are the case's params over default_params. threads
  // (>= 1): how many the fast paths may use (blockwise.hpp, fp8_cast.hpp; worth_threads below); the
  // outputs are the same bytes for any count. Formats without fast paths run on one thread.
  std::function<std::vector<Tensor>(const Case& in, const nlohmann::json& params, int threads)> run;
  // The explainer of output `tensor` for one comparison of expected with actual (both complete, and
  // alive while it is used): why element i differs. What it needs of the whole cases (dequantized
  // states, tables, params) is read once here, so that each mismatching element costs O(1). It
  // returns an empty explainer for a tensor it has nothing to say about.
  std::function<ElementExplainer(const Case& expected, const Case& actual, const std::string& tensor)> explain;
  // The dequantized values of the case's quantized state (for inspect's layout-free signature), from
  // the tensors named in dequantize_reads; params are the case's over the defaults. Called through
  // dequantized_state, which checks the case first.
  std::function<std::vector<float>(const Case& c, const nlohmann::json& params)> dequantize;
  std::vector<std::string> dequantize_reads;
  // Input tensors other than "input" that golden generate supplies (e.g. the default qmap).
  std::function<std::vector<Tensor>(const nlohmann::json& params)> auxiliary_inputs;
  // Optimizer steps only: the case before a first step on this parameter (grad zero, step 0, fresh
  // moments as the library creates them), for golden generate to run steps from.
  std::function<Case(std::span<const float> param, const nlohmann::json& params)> fresh_state;
  // Inputs aimed at the format's boundaries (TestFloat style) for golden generate.
  std::function<std::vector<float>(const nlohmann::json& params)> edge_inputs;
  // Inputs on the decision points of a back end that the edges miss (bitsandbytes' CPU lookup table:
  // its cells' boundaries, where the edges' midpoints lie inside cells): the `table-edges` input.
  std::function<std::vector<float>(const nlohmann::json& params)> table_edge_inputs;
  // The block sizes the default battery runs besides the default one (docs/verifying-a-kernel.md,
  // "What the battery reaches"): the smallest and the largest the library takes, and any it uses in
  // practice (bitsandbytes' optimizers' 256).
  std::vector<std::size_t> battery_block_sizes;
  // The element count of one more random input, larger than every other of the battery (0: none), for
  // the formats whose libraries split their work over threads: a kernel that splits its own above a
  // size, off a block boundary, is caught only above that size (docs/verifying-a-kernel.md).
  std::size_t battery_large_count = 0;
  // Parameter values the libraries use in practice besides the defaults (bitsandbytes' optimizers
  // quantize their second moments with the unsigned dynamic map: {"map": "dynamic_unsigned"}), each
  // of which the default battery also runs on its boundary and special inputs.
  std::vector<nlohmann::json> battery_params;
  // The input must be whole blocks of the param block_size (torchao): golden generate and verify pad
  // the fixed special list with +0.0 to one (docs/golden-files.md, "special on whole-block formats").
  bool whole_blocks = false;
  // A 2-D format (COAT's activations, coat.fake.symm): the tile its generated inputs are made of, for
  // the params. golden generate, verify and default_inputs shape a generated input as whole tiles
  // (input_shape.hpp); std::invalid_argument for params that make no tile. Empty: 1-D inputs.
  std::function<InputTile(const nlohmann::json& params)> input_tile;

  // The declaration of a tensor among the inputs, optional inputs and outputs; null when none.
  const TensorSpec* tensor(std::string_view name) const;

  // The audit's round trip (docs/audit.md): the values of x after the reference quantizes and
  // dequantizes it at block_size with the default params, written to out (x.size() values). x is
  // finite, a run of whole blocks of a larger tensor (the last may be partial) starting at a block
  // boundary; tensor_has_negative says whether that tensor has a value < 0 (COAT's optimizer stores
  // a non-negative tensor as a second moment).
  std::function<void(std::span<const float> x, std::size_t block_size, bool tensor_has_negative, std::span<float> out)>
      round_trip;
  BlockSizes round_trip_blocks;  // where round_trip applies
  // The tensors the library keeps for one tensor quantized by round_trip, as it stores them (torchao
  // 4-bit: codes_packed, not codes; COAT: one moment's codes and per-group statistics): the audit's
  // bits per element are their sizes, derived from their schema (dtype, shape relation) and layouts
  // at the round trip's block size (the `block_size` parameter where the format has one), over the
  // tensor's elements (audit_storage.hpp).
  std::vector<std::string> round_trip_stores;
  // round_trip quantizes whole blocks only and zero-pads a partial tail block (torchao): the padding
  // is stored too.
  bool round_trip_pads = false;
  // Why round_trip does not apply to a tensor with a negative value ("n/a (...)"); empty: it does.
  std::string refuses_negative;
};

const std::vector<FormatSpec>& registered_formats();
const FormatSpec* find_format(std::string_view name);
// Whether a format name matches a shell glob ('torchao.codebook8.*'), as conform --format selects.
bool format_matches(std::string_view glob, std::string_view name);
// The registered formats `has_hook` accepts that match any of the names or globs (all of them when
// there are none), in registry order. std::invalid_argument naming the names and globs that match
// none of them and listing those that exist.
std::vector<const FormatSpec*> select_formats(const std::vector<std::string>& globs,
                                              const std::function<bool(const FormatSpec&)>& has_hook);
// A size parameter (block_size, group_size, expand_min) of resolved params: a whole number from 1 to
// 2^31 - 1, else std::invalid_argument naming it, by the layouts' rule (extent_param in layout.hpp);
// nlohmann's get<size_t>() would read -1 as 2^64 - 1.
std::size_t positive_size_param(const nlohmann::json& params, const char* key);
// params = defaults overlaid with the given object; unknown keys are an error naming the format.
nlohmann::json resolve_params(const FormatSpec& f, const nlohmann::json& given);

// The blocks of the case's tensor under its format's declared layout, with the case's params over the
// format's defaults. A tensor the format does not declare, or of an unknown format, is one block.
BlockMap block_map(const Case& c, std::string_view tensor);
BlockMap block_map(const Case& c, const Tensor& tensor);  // tensor: one of c's

// The case's input tensors and metadata with the reference's outputs added (replacing any there).
// Params come from the case's metadata over the format's defaults. The case is first checked
// against the format's schema (validate_case, inputs); every error names the case's file. threads:
// FormatSpec::run's; the same bytes for any count.
Case run_reference(const FormatSpec& f, const Case& in, int threads = 1);

// The threads a format's run gives the fast paths for a tensor of `elements`: `threads`, or 1 below
// 2^16 elements, where starting threads (per call) costs more than they save.
int worth_threads(std::size_t elements, int threads);

// inspect's dequantized state of a case of a registered format: its values, or (values empty) why
// there are none ("the format has no dequantizer", "tensor 'scale' is missing"). The declared
// tensors it has are checked against the schema first (CaseError naming the file on a violation).
struct DequantizedState {
  std::vector<float> values;
  std::string unavailable;
};
DequantizedState dequantized_state(const FormatSpec& f, const Case& c);
// The signature of dequantized values (inspect's, and the Python package's state_signature): the
// lower-case hex sha256 of the float32 values' little-endian bytes in element order, so the same
// values stored in another layout (block size, packing, dtype of the codes) sign alike.
std::string dequantized_signature(std::span<const float> values);

// Optimizer steps: the state after a step as the next step's state. Each "X.next" output becomes X;
// a format without "step.next" (bitsandbytes, COAT: step is the update's own number) counts its
// int64 step up.
Case advanced_state(const Case& done);

// Registration hooks, one per family (defined beside each family's reference code).
void register_fp8_formats(std::vector<FormatSpec>& out);
void register_codebook_formats(std::vector<FormatSpec>& out);
void register_optimizer_formats(std::vector<FormatSpec>& out);
void register_coat_activation_formats(std::vector<FormatSpec>& out);  // formats_coat_activation.cpp
void register_coat_fake_formats(std::vector<FormatSpec>& out);        // formats_coat_fake.cpp
void register_coat_optimizer_formats(std::vector<FormatSpec>& out);   // formats_coat_optimizer.cpp

}  // namespace lowbit
