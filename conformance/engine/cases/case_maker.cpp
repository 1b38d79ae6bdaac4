#include "lowbit/case_maker.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "lowbit/file_input.hpp"
#include "lowbit/input_shape.hpp"

namespace lowbit {

namespace {

std::string param_value_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// "normal:n=4096,seed=3" with lr 0.01 -> "normal.n4096.seed3.lr-0.01": readable and stable (a dtype by
// its name alone: "special-blocks:dtype=bf16" -> "special-blocks.bf16").
std::string case_stem(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params) {
  std::string name = spec.kind;
  for (const auto& [k, v] : spec.args) name += "." + (k == "dtype" ? v : k + v);  // "normal.bf16.n4096.seed1"
  return file_name_safe(name + differing_params(format, params));
}

// The same spec with another seed: the parameter draws seed, step k's gradient seed + k.
InputSpec reseeded(const InputSpec& s, std::uint64_t seed) {
  InputSpec r = s;
  r.args["seed"] = std::to_string(seed);
  return r;
}

CaseToRun with_metadata(Case in, const FormatSpec& format, const nlohmann::json& params, std::string stem,
                        std::string described, std::uint64_t seed, const MadeBy& made_by) {
  if (format.auxiliary_inputs)
    for (Tensor& t : format.auxiliary_inputs(params)) in.add(std::move(t));
  in.metadata = {{"format", format.name},
                 {"params", params.dump()},
                 {"source", made_by.source},
                 {"function", format.provenance},
                 {"seed", std::to_string(seed)},
                 {"input", described},
                 {"generator", made_by.generator}};
  in.origin = stem;
  return {std::move(in), std::move(stem), std::move(described)};
}

}  // namespace

std::string file_name_safe(std::string name) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  return name;
}

std::string differing_params(const FormatSpec& format, const nlohmann::json& params) {
  std::string part;
  for (const auto& [k, v] : params.items())
    if (!format.default_params.contains(k) || format.default_params.at(k) != v) part += "." + k + "-" + param_value_text(v);
  return part;
}

bool takes_input(const FormatSpec& format) {
  return static_cast<bool>(format.fresh_state) ||
         std::find(format.inputs.begin(), format.inputs.end(), "input") != format.inputs.end();
}

CaseToRun table_case(const FormatSpec& format, const nlohmann::json& params, const MadeBy& made_by) {
  std::string stem;
  for (const auto& [k, v] : params.items()) stem += (stem.empty() ? "" : ".") + k + "-" + param_value_text(v);
  return with_metadata(Case{}, format, params, file_name_safe(stem.empty() ? "case" : stem), "none", 0, made_by);
}

namespace {

// The generated input as a tensor of the dtype its input spec names (values already narrowed to it: exact).
Tensor input_tensor(DType dtype, std::vector<std::int64_t> shape, const std::vector<float>& values) {
  if (dtype == DType::F32) return Tensor::from_f32("input", std::move(shape), values);
  std::vector<std::uint8_t> bytes(values.size() * 2);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint16_t h = narrowed_bits(dtype, values[i]);
    bytes[2 * i] = static_cast<std::uint8_t>(h);
    bytes[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
  }
  return Tensor::from_bytes("input", dtype, std::move(shape), bytes);
}

// A case of no elements checks nothing, and a kernel that writes nothing would pass it: refused
// (normal:n=0, edges:n=0, an empty tensor of a file) before any case is made.
void require_elements(const InputSpec& spec, std::size_t elements, const std::string& what) {
  if (elements == 0)
    throw std::invalid_argument("input spec '" + spec.text + "': " + what +
                                " has 0 elements: nothing to check (give at least one value)");
}

// The cases of a file: input: the quantizer's input as the file holds it (dtype and shape kept); an
// optimizer's param and grad from the file, the same gradient at every step.
void for_each_file_case(const FormatSpec& format, const nlohmann::json& params, const InputSpec& spec, int steps,
                        const MadeBy& made_by, const std::function<Case(CaseToRun)>& run) {
  const std::filesystem::path path = spec.args.at("path");
  const auto tensor = spec.args.find("tensor");
  const std::string stem = file_name_safe("file." + path.stem().string() +
                                          (tensor != spec.args.end() ? "." + tensor->second : "") +
                                          differing_params(format, params));
  if (!format.fresh_state) {
    Case in;
    in.add(file_input_tensor(spec));
    require_elements(spec, in.tensors().front().element_count(), "the tensor");
    run(with_metadata(std::move(in), format, params, stem, spec.text, 0, made_by));
    return;
  }
  if (tensor != spec.args.end())
    throw std::invalid_argument("input spec '" + spec.text + "': an optimizer takes the file's 'param' and 'grad'; "
                                "drop ':" + tensor->second + "'");
  const Case file = read_file_input(spec);
  const std::vector<float> param = file.require("param").f32(), grad = file.require("grad").f32();
  require_elements(spec, param.size(), "'param'");
  if (grad.size() != param.size())
    throw std::invalid_argument("input spec '" + spec.text + "': 'grad' has " + std::to_string(grad.size()) +
                                " elements and 'param' " + std::to_string(param.size()));
  Case state = format.fresh_state(param, params);
  for (int k = 1; k <= steps; ++k) {
    state.add(Tensor::from_f32("grad", state.require("param").shape, grad));
    const std::string described = spec.text + " (param and grad; step " + std::to_string(k) + ")";
    state = advanced_state(run(with_metadata(std::move(state), format, params, stem + ".step" + std::to_string(k),
                                             described, 0, made_by)));
  }
}

}  // namespace

void for_each_case(const FormatSpec& format, const nlohmann::json& params, const InputSpec& spec, int steps,
                   const MadeBy& made_by, const std::function<Case(CaseToRun)>& run, int threads) {
  if (spec.kind == "file") return for_each_file_case(format, params, spec, steps, made_by, run);
  const std::string stem = case_stem(spec, format, params);
  if (!format.fresh_state) {
    std::vector<float> values = generate_inputs(spec, format, params, threads);
    // a 2-D format's input as whole tiles (the fixed lists padded with zeros), said in the metadata
    const InputShape shape = input_shape(spec, format, params, values.size());
    values.resize(values.size() + shape.padding, 0.0f);
    require_elements(spec, values.size(), "the input");
    Case in;
    in.add(input_tensor(spec.dtype(), shape.shape, values));
    std::string described = spec.text + shape.described;
    if (const std::size_t zeros = special_padding(spec, format, params))
      described += " (padded with " + std::to_string(zeros) + " zeros to a whole block of " +
                   std::to_string(values.size()) + ": " + format.name + " quantizes whole blocks only)";
    run(with_metadata(std::move(in), format, params, stem, described, spec.seed(), made_by));
    return;
  }
  if (spec.dtype() != DType::F32)
    throw std::invalid_argument("input spec '" + spec.text + "': " + format.name +
                                " steps float32 parameters and gradients; drop dtype");
  // gradient-blocks' special blocks are the gradients': its parameter is the normal kind's draw
  InputSpec param_spec = spec;
  if (spec.kind == "gradient-blocks") param_spec.kind = "normal";
  std::vector<float> param = generate_inputs(param_spec, format, params, threads);
  require_elements(spec, param.size(), "the parameter");
  Case state = format.fresh_state(std::move(param), params);
  for (int k = 1; k <= steps; ++k) {
    const InputSpec grad_spec = reseeded(spec, spec.seed() + static_cast<std::uint64_t>(k));
    state.add(Tensor::from_f32("grad", state.require("param").shape, generate_inputs(grad_spec, format, params, threads)));
    const std::string described = spec.text + " (param; step " + std::to_string(k) +
                                  "'s gradient: the same spec with seed " + std::to_string(grad_spec.seed()) + ")";
    state = advanced_state(run(with_metadata(std::move(state), format, params, stem + ".step" + std::to_string(k),
                                             described, spec.seed(), made_by)));
  }
}

}  // namespace lowbit

namespace lowbit {

std::vector<InputRun> default_input_runs(const FormatSpec& f, const nlohmann::json& given) {
  if (!takes_input(f)) return {};
  // every run's params are the format's defaults, the run's own values, then the given ones over
  // them; the sizes of the inputs (tiles, blocks) are made from the params the run ends up with
  const auto with_given = [&given](nlohmann::json p) {
    if (given.is_object()) p.update(given);
    return p;
  };
  // An optimizer whose default weight_decay is 0 also takes steps with AdamW's usual 0.01: where the
  // decay is applied (before or after the update) is invisible without it. (Which runs there are is
  // decided on the format's defaults; the given params then apply to each.)
  if (f.fresh_state) {
    const nlohmann::json& own = f.default_params;
    std::vector<InputRun> runs = {{"normal:n=4096,seed=1,std=0.5", own}, {"adam-v:n=4096,seed=2", own}};
    // an optimizer's own decision points (COAT's: zeros, groups of one magnitude, a partial group)
    if (f.edge_inputs) runs.push_back({"edges", own});
    if (own.contains("weight_decay") && own.at("weight_decay").get<double>() == 0.0) {
      nlohmann::json decayed = own;
      decayed["weight_decay"] = 0.01;
      runs.push_back({"normal:n=4096,seed=3,std=0.5", decayed});
    }
    // AdEMAMix's schedulers (t_alpha, t_beta3; off by default, as bitsandbytes' None) are invisible
    // without them: a run with both on, ending inside verify's default 3 steps
    if (own.contains("t_alpha") && own.at("t_alpha") == 0) {
      nlohmann::json scheduled = own;
      scheduled["t_alpha"] = 2;
      scheduled["t_beta3"] = 4;  // not t_alpha's: a scheduler read with the other's period shows
      runs.push_back({"normal:n=4096,seed=4,std=0.5", scheduled});
    }
    // A block-wise state's own decision points (docs/verifying-a-kernel.md, "What the battery
    // reaches"): zero, tiny, NaN and infinite blocks of gradients, moving between steps, over whole
    // blocks (torchao) or with a partial last block of 37 (bitsandbytes' tail)
    if (own.contains("block_size"))
      runs.push_back({std::string("gradient-blocks:n=") + (f.whole_blocks ? "4096" : "4133") + ",seed=6,std=0.5", own});
    for (InputRun& r : runs) r.params = with_given(std::move(r.params));
    return runs;
  }
  const nlohmann::json defaults = with_given(f.default_params);
  std::vector<InputRun> runs;
  auto push = [&](const std::string& spec) { runs.push_back({spec, defaults}); };
  if (f.edge_inputs) push("edges");
  if (f.edge_inputs && !edge_block_param(defaults).empty()) push("scaled-edges");
  push("special");  // 18 values: one partial block (a whole-block or 2-D format pads them to one block or tile)
  // the special values again, cycled over one whole block, for the formats that quantize whole
  // blocks only (torchao refuses the partial one): a NaN and an Inf in a block, for every format;
  // for a 2-D format over whole tiles, at least 288 values: the cycle of 18 over 9 groups of 16 puts
  // every rotation of the list in a group (NaN without Inf, Inf without NaN, both)
  if (f.input_tile) {
    const InputTile t = f.input_tile(defaults);
    const std::int64_t area = t.rows * t.cols;
    push("special:n=" + std::to_string(area * ((288 + area - 1) / area)));
  } else if (defaults.contains("block_size")) {
    push("special:n=" + defaults.at("block_size").dump());
  }
  const std::string n = std::to_string(battery_count(f, defaults));
  for (const char* s : {"normal:n={},seed=1", "outliers:n={},seed=2", "lognormal:n={},seed=3"}) {
    std::string spec = s;
    spec.replace(spec.find("{}"), 2, n);
    push(spec);
  }
  // a kernel's threaded path, taken only above a size it chose (a partial tail at the default block size)
  if (f.battery_large_count) push("normal:n=" + std::to_string(f.battery_large_count) + ",seed=7");
  // The decision points of a block's own (docs/verifying-a-kernel.md, "What the battery reaches"): a
  // lookup table's cells, tiny and subnormal absmaxes, blocks of one special value and a last block
  // ending on its largest value (a 2-D format's as whole tiles: each group or tile of one value)
  const std::string block_param = edge_block_param(defaults);
  if (f.table_edge_inputs) push("table-edges");
  if (f.edge_inputs && !block_param.empty()) push("tiny-blocks");
  if (!block_param.empty() || f.input_tile) push("special-blocks");
  // a 2-D group quantizer's NaN-led groups and tiles holding numbers, groups of NaNs alone after a
  // first group of numbers (block_inputs.hpp's nan_tiles)
  if (f.input_tile && defaults.contains("group_size")) push("nan-tiles");
  // the other block sizes the library takes: its boundaries, its special blocks and a random input
  // (a 2-D format's of whole tiles of that size, one at least)
  for (std::size_t block : f.battery_block_sizes) {
    nlohmann::json sized = f.default_params;
    sized[block_param] = block;
    sized = with_given(std::move(sized));
    std::size_t n = 4096;
    if (f.input_tile) {
      const InputTile t = f.input_tile(sized);
      const auto area = static_cast<std::size_t>(t.rows * t.cols);
      n = (n + area - 1) / area * area;
    } else if (f.whole_blocks) {  // whole blocks, and an even count (torchao's 4-bit codes are packed in pairs)
      const std::size_t unit = block % 2 ? 2 * block : block;
      n = (n + unit - 1) / unit * unit;
    }
    for (const std::string& spec : {std::string("edges"), std::string("special-blocks"), "normal:n=" + std::to_string(n) + ",seed=5"})
      runs.push_back({spec, sized});
  }
  // the parameter values the libraries use in practice: the boundaries, the special values and blocks
  for (const nlohmann::json& values : f.battery_params) {
    nlohmann::json p = f.default_params;
    p.update(values);
    p = with_given(std::move(p));
    for (const std::string spec : {"edges", "table-edges", "tiny-blocks", "special", "special-blocks"})
      if ((spec != "table-edges" || f.table_edge_inputs) && (spec != "tiny-blocks" || !block_param.empty()))
        runs.push_back({spec, p});
  }
  // 16-bit inputs, for a format whose input takes them: the kernel's bf16 or f16 path (its widening,
  // outputs in that dtype). An element-wise format gets every bit pattern of the dtype, as float32
  // (every round bit with its sticky bits alone, at every exponent) and as that dtype (subnormals, Inf,
  // every NaN payload); a block or tile format the random input and the special blocks narrowed to it
  const TensorSpec* input = f.tensor("input");
  for (const DType d : {DType::BF16, DType::F16}) {
    if (!input || std::find(input->schema.dtypes.begin(), input->schema.dtypes.end(), d) == input->schema.dtypes.end())
      continue;
    const std::string dtype = d == DType::BF16 ? "bf16" : "f16";
    if (block_param.empty() && !f.input_tile) {
      push("all-" + dtype);
      push("all-" + dtype + ":dtype=" + dtype);
    } else {
      push("normal:n=" + n + ",seed=1,dtype=" + dtype);
      push("special-blocks:dtype=" + dtype);
    }
  }
  return runs;
}

namespace {
struct UnfitInput {};  // a battery input the format cannot take: on_skip has it
}  // namespace

void for_each_reference_case(const FormatSpec& format, const InputRun& run, int steps, const MadeBy& made_by,
                             bool skip_unfit, const std::function<void(const std::string& stem, const Case& c)>& on_case,
                             const std::function<void(const std::string& stem, const std::string& why)>& on_skip,
                             int threads) {
  const InputSpec spec = parse_input_spec(run.spec);
  try {
    for_each_case(format, run.params, spec, steps, made_by, [&](CaseToRun c) {
      Case expected;
      try {
        expected = run_reference(format, c.inputs, threads);
      } catch (const CaseError& e) {
        if (!skip_unfit) throw;
        on_skip(c.stem, e.what());
        throw UnfitInput{};
      }
      on_case(c.stem, expected);
      return expected;  // the next step starts from the reference's state
    }, threads);
  } catch (const UnfitInput&) {
  }
}

}  // namespace lowbit
