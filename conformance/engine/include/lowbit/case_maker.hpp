#pragma once
// The cases an input spec makes for a format, as golden generate writes them and verify runs them:
// one case of generated `input` (with the format's auxiliary inputs such as its default qmap) for a
// quantizer; for an optimizer step, the parameter drawn by the input spec, a fresh state, and `steps` steps,
// each with a gradient drawn by the same spec with seed + step, each step starting from the state the
// reference left after the previous one (so one wrong element of a kernel does not spread).
#include <cstdint>
#include <functional>
#include <string>

#include "lowbit/case.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/generators.hpp"

namespace lowbit {

// One case to run: its inputs and metadata (format, params, source, function, seed, input,
// generator), its file name stem ("normal.n4096.seed3", "normal.n300.step2") and what made it.
struct CaseToRun {
  Case inputs;
  std::string stem;
  std::string described;  // "normal:n=300 (param; step 2's gradient: the same spec with seed 3)"
};

// Who makes the cases, for their metadata: source "lowbit 0.1.0", generator "lowbit golden generate 0.1.0".
struct MadeBy {
  std::string source, generator;
};

// Calls `run` with every case the input spec makes, in order; `run` returns the case after the reference
// ran on it (inputs and outputs), from which an optimizer's next step starts. std::invalid_argument
// on a bad spec. threads make the inputs (generate_inputs): the same values for any count.
void for_each_case(const FormatSpec& format, const nlohmann::json& params, const InputSpec& spec, int steps,
                   const MadeBy& made_by, const std::function<Case(CaseToRun)>& run, int threads = 1);

// The case of a format that takes no input (a table), with its metadata.
CaseToRun table_case(const FormatSpec& format, const nlohmann::json& params, const MadeBy& made_by);

// A name as a file name: every character but letters, digits, '.', '-' and '_' becomes '_'.
std::string file_name_safe(std::string name);

// One input spec of a battery, with the params its cases are made with.
struct InputRun {
  std::string spec;
  nlohmann::json params;
};

// The inputs verify runs when none is given (and the Python package's default battery): the format's
// boundaries, special values and random distributions, or for an optimizer steps from a few
// parameters. Empty for a format that takes no input (its one case is table_case's). `given` (verify's
// --param) is set over every run's params before the run's input is sized, so that a tile or block
// size given makes inputs of whole tiles or blocks of that size.
std::vector<InputRun> default_input_runs(const FormatSpec& f, const nlohmann::json& given = nlohmann::json::object());

// Every case of one run after the reference ran on it, in order (an optimizer's `steps` steps, each
// from the reference's state after the previous one): on_case(stem, the complete case). When
// skip_unfit (the default battery), a case the format cannot take (CaseError from the reference:
// COAT's activations want 2-D tiles, torchao whole blocks) ends the run with on_skip(stem, why);
// otherwise that error is thrown. A bad spec: std::invalid_argument. Exceptions of on_case propagate.
// threads: the inputs' and the reference's (run_reference); the same bytes for any count.
void for_each_reference_case(const FormatSpec& format, const InputRun& run, int steps, const MadeBy& made_by,
                             bool skip_unfit, const std::function<void(const std::string& stem, const Case& c)>& on_case,
                             const std::function<void(const std::string& stem, const std::string& why)>& on_skip,
                             int threads = 1);

// Whether the format's cases are made from an input spec (it reads `input`, or steps an optimizer).
bool takes_input(const FormatSpec& format);

// The params that differ from the format's defaults, as a name part ".lr-0.01.adamw-false" (key
// order), empty when all are defaults.
std::string differing_params(const FormatSpec& format, const nlohmann::json& params);

}  // namespace lowbit
