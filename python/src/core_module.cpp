// lowbit._core: the engine's entry points for the Python package (lowbit/__init__.py wraps them). No
// arithmetic, comparison, classification or report is written here: each function converts its
// arguments (case_convert.hpp), calls the engine and converts the result back. JSON crosses as text.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <tuple>

#include "case_convert.hpp"
#include "lowbit/audit.hpp"
#include "lowbit/audit_budget.hpp"
#include "lowbit/audit_exact.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/compare.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/kernel_choice.hpp"
#include "lowbit/kernel_sandbox.hpp"
#include "lowbit/plugin_host.hpp"
#include "lowbit/printable.hpp"
#include "lowbit/schema.hpp"
#include "lowbit/sha256.hpp"
#include "lowbit/tolerance.hpp"
#include "lowbit/verify.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace lowbit::python {
namespace {

const char* const kVersion = "0.1.0";

const FormatSpec& format_named(const std::string& name) {
  if (const FormatSpec* f = find_format(name)) return *f;
  std::string names;
  for (const FormatSpec& f : registered_formats()) names += (names.empty() ? "" : ", ") + f.name;
  throw std::invalid_argument("unknown format '" + name + "' (registered: " + names + ")");
}

nlohmann::json tensor_specs(const std::vector<TensorSpec>& specs) {
  nlohmann::json out = nlohmann::json::array();
  for (const TensorSpec& t : specs) {
    nlohmann::json dtypes = nlohmann::json::array();
    for (DType d : t.schema.dtypes) dtypes.push_back(std::string(dtype_name(d)));
    out.push_back({{"name", t.name},
                   {"dtypes", dtypes},
                   {"dtype_of", t.schema.dtype_of},
                   {"shape", t.schema.shape.describe()},
                   {"scales", t.layout.scales},
                   {"required_when", t.schema.required_when}});
  }
  return out;
}

// Every registered format as the Python side's FormatInfo reads it.
std::string formats_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const FormatSpec& f : registered_formats()) {
    nlohmann::json blocks = nullptr;
    if (f.round_trip)
      blocks = {{"min", f.round_trip_blocks.min}, {"max", f.round_trip_blocks.max},
                {"power_of_two", f.round_trip_blocks.power_of_two}, {"why_not", f.round_trip_blocks.why_not}};
    out.push_back({{"name", f.name},
                   {"description", f.description},
                   {"provenance", f.provenance},
                   {"default_params", f.default_params},
                   {"default_tolerance", f.default_tolerance},
                   {"inputs", tensor_specs(f.inputs)},
                   {"optional_inputs", tensor_specs(f.optional_inputs)},
                   {"outputs", tensor_specs(f.outputs)},
                   {"takes_input", takes_input(f)},
                   {"optimizer", static_cast<bool>(f.fresh_state)},
                   {"dequantize_reads", f.dequantize ? nlohmann::json(f.dequantize_reads) : nlohmann::json(nullptr)},
                   {"round_trip_blocks", blocks},
                   {"refuses_negative", f.refuses_negative}});
  }
  return out.dump();
}

// The params a format resolves the given ones to (unknown keys and wrong types are errors naming it).
std::string resolved_params(const std::string& format, const std::string& params_json) {
  const FormatSpec& f = format_named(format);
  try {
    return resolve_params(f, nlohmann::json::parse(params_json)).dump();
  } catch (const std::runtime_error& e) {  // an unknown parameter or a wrong type: the caller's mistake
    throw std::invalid_argument(e.what());
  }
}

// The tensors golden generate adds beside `input` (a codebook's default qmap).
nb::tuple auxiliary_inputs(const std::string& format, const std::string& params_json) {
  const FormatSpec& f = format_named(format);
  Case c;
  if (f.auxiliary_inputs)
    for (Tensor& t : f.auxiliary_inputs(resolve_params(f, nlohmann::json::parse(params_json)))) c.add(std::move(t));
  return case_to_python(c);
}

// The reference on a case's inputs: the case with the reference's outputs added.
nb::tuple run_reference_py(nb::handle tensors, nb::handle metadata, const std::string& origin) {
  Case in = case_from_python(tensors, metadata, origin);
  Case out;
  {
    nb::gil_scoped_release release;
    out = run_reference(format_named(in.format()), in);
  }
  out.origin = origin;
  return case_to_python(out);
}

// compare_cases under a policy (a shipped name looked up in policy_dir, or a JSON file's path):
// (report JSON, report Markdown, conformant).
nb::tuple compare_py(nb::handle e_tensors, nb::handle e_meta, const std::string& e_origin, nb::handle a_tensors,
                     nb::handle a_meta, const std::string& a_origin, const std::string& policy_name,
                     const std::string& policy_dir, bool strict, std::size_t max_listed) {
  const Case expected = case_from_python(e_tensors, e_meta, e_origin);
  const Case actual = case_from_python(a_tensors, a_meta, a_origin);
  TolerancePolicy policy = load_tolerance_policy(policy_name, policy_dir);
  policy.strict = strict;
  ComparisonReport r;
  {
    nb::gil_scoped_release release;
    r = compare_cases(expected, actual, policy, max_listed);
  }
  return nb::make_tuple(report_json(r).dump(), report_markdown(r), r.conformant);
}

// A format's default policy, for compare(policy=None).
std::string default_tolerance(const std::string& format) {
  const FormatSpec* f = find_format(format);
  return f ? f->default_tolerance : "bit-exact";
}

nb::tuple parse_case_py(nb::bytes data, const std::string& origin) {
  const auto* p = static_cast<const std::uint8_t*>(data.data());
  return case_to_python(parse_case({p, data.size()}, origin));
}

nb::tuple read_case_py(const std::string& path) { return case_to_python(read_case(path)); }

nb::bytes serialize_case_py(nb::handle tensors, nb::handle metadata, const std::string& origin) {
  const std::vector<std::uint8_t> bytes = serialize_case(case_from_python(tensors, metadata, origin));
  return nb::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// The default battery (verify's, case_maker.hpp): every complete case (inputs and the reference's
// outputs) with its stem, and the inputs the format cannot take with why.
nb::tuple battery(const std::string& format, int steps) {
  const FormatSpec& f = format_named(format);
  if (steps < 1) throw std::invalid_argument("steps must be at least 1");
  const MadeBy made_by{std::string("lowbit ") + kVersion, std::string("lowbit-python default_inputs ") + kVersion};
  nb::list cases, skipped;
  if (!takes_input(f)) {
    CaseToRun c = table_case(f, f.default_params, made_by);
    cases.append(nb::make_tuple(c.stem, case_to_python(run_reference(f, c.inputs))));
  }
  for (const InputRun& run : default_input_runs(f))
    for_each_reference_case(
        f, run, steps, made_by, true,
        [&](const std::string& stem, const Case& c) { cases.append(nb::make_tuple(stem, case_to_python(c))); },
        [&](const std::string& stem, const std::string& why) { skipped.append(nb::make_tuple(stem, why)); });
  return nb::make_tuple(cases, skipped);
}

// inspect's dequantized state: (values, why there are none).
nb::tuple dequantize_py(nb::handle tensors, nb::handle metadata, const std::string& origin) {
  const Case c = case_from_python(tensors, metadata, origin);
  DequantizedState s = dequantized_state(format_named(c.format()), c);
  return nb::make_tuple(owned_floats(std::move(s.values)), s.unavailable);
}

using Floats = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

std::string signature_py(Floats values) { return dequantized_signature({values.data(), values.size()}); }

// torchao's 4-bit states store two codes a byte (first element high): the codes one per element.
OwnedBytes unpack_nibbles_py(Bytes packed, std::size_t count) {
  if (count > 2 * packed.size() || count + 1 < 2 * packed.size())
    throw std::invalid_argument(std::to_string(packed.size()) + " packed bytes cannot hold " + std::to_string(count) +
                                " 4-bit codes");
  return owned_bytes(blockwise::unpack_nibbles({packed.data(), packed.size()}, count));
}

std::string sha256_py(Bytes bytes) { return sha256_hex({bytes.data(), bytes.size()}); }

// Text from a file (a key, a path) as the C++ tools print it (printable.hpp): control characters and
// invalid UTF-8 escaped, so that python -m lowbit prints a name as the lowbit command does.
std::string printable_py(nb::bytes text) { return printable(std::string_view(text.c_str(), text.size())); }

// The audit's measures of one format's round trip at one block size (audit.hpp), as a dict.
nb::dict audit_py(const std::string& format, Floats x, std::size_t block_size, int threads) {
  const FormatSpec& f = format_named(format);
  audit::Metrics m;
  {
    nb::gil_scoped_release release;
    m = audit::audit(f, {x.data(), x.size()}, block_size, threads);
  }
  nb::dict d;
  d["n"] = m.n;
  d["blocks"] = m.blocks;
  d["signed"] = m.is_signed;
  d["mean_abs"] = m.mean_abs;
  d["mean_rel"] = m.mean_rel;
  d["rel_l2"] = m.rel_l2;
  d["max_abs"] = m.max_abs;
  d["sqnr_db"] = m.sqnr_db;
  d["nonzeros"] = m.nonzeros;
  d["flushed"] = m.flushed;
  d["flushed_fraction"] = m.flushed_fraction;
  d["worst_block"] = m.worst_block;
  d["worst_block_mean_abs"] = m.worst_block_mean_abs;
  d["bits_per_element"] = m.bits_per_element;
  return d;
}

// The configurations that give most of x's nonzero blocks back unchanged, tried over every format with
// a round trip as lowbit audit tries them (audit_exact.hpp): ([(format, block_size, exact_blocks,
// blocks)], the CLI's warning naming `name`, or "" when x does not look already quantized).
nb::tuple exact_round_trips_py(Floats x, const std::string& name) {
  std::vector<audit::ExactRoundTrip> exact;
  {
    nb::gil_scoped_release release;
    exact = audit::exact_round_trips({x.data(), x.size()}, audit::formats());
  }
  nb::list out;
  for (const auto& e : exact) out.append(nb::make_tuple(e.format->name, e.block_size, e.exact_blocks, e.blocks));
  return nb::make_tuple(out, exact.empty() ? std::string() : audit::exact_warning(name, exact));
}

// lowbit.choose: audit::choose over audit_state's row dicts (tensor, format, block_size, and the
// measures or not_applicable; looks_already_quantized marks a configuration the tensor comes back
// from unchanged). One dict per tensor, then one for every tensor (input None), as the CLI's JSON.
nb::list choose_py(nb::list row_dicts, const std::string& budget_text) {
  const audit::Budget budget = audit::parse_budget(budget_text);
  std::vector<audit::Row> rows;
  std::set<std::tuple<std::string, std::string, std::size_t>> exact;  // (tensor, format, block)
  for (nb::handle h : row_dicts) {
    const auto d = nb::cast<nb::dict>(h);
    audit::Row r;
    r.input = nb::cast<std::string>(d["tensor"]);
    r.format = &format_named(nb::cast<std::string>(d["format"]));
    r.block = nb::cast<std::size_t>(d["block_size"]);
    if (d.contains("not_applicable")) {
      r.note = nb::cast<std::string>(d["not_applicable"]);
    } else {
      r.m.n = nb::cast<std::size_t>(d["n"]);
      r.m.mean_abs = nb::cast<double>(d["mean_abs"]);
      r.m.mean_rel = nb::cast<double>(d["mean_rel"]);
      r.m.rel_l2 = nb::cast<double>(d["rel_l2"]);
      r.m.max_abs = nb::cast<double>(d["max_abs"]);
      r.m.sqnr_db = nb::cast<double>(d["sqnr_db"]);
      r.m.bits_per_element = nb::cast<double>(d["bits_per_element"]);
    }
    if (d.contains("looks_already_quantized") && nb::cast<bool>(d["looks_already_quantized"]))
      exact.insert({r.input, r.format->name, r.block});
    rows.push_back(std::move(r));
  }
  nb::list out;
  for (const audit::Choice& c : audit::choose(rows, budget)) {
    bool flagged = false;  // as the CLI's choice_flagged
    if (c.best)
      for (const auto& [tensor, format, block] : exact)
        flagged = flagged || ((c.input.empty() || c.input == tensor) && format == c.best->format->name && block == c.best->block);
    nb::dict d;
    d["input"] = c.input.empty() ? nb::none() : nb::cast(c.input);
    d["candidates"] = c.candidates;
    d["budget"] = budget.text();
    d["format"] = c.best ? nb::cast(c.best->format->name) : nb::none();
    d["block_size"] = c.best ? nb::cast(c.best->block) : nb::none();
    d["bits_per_element"] = c.best ? nb::cast(c.best->m.bits_per_element) : nb::none();
    d[budget.metric.c_str()] = c.best ? nb::cast(audit::measure_of(c.best->m, budget.metric)) : nb::none();
    d["looks_already_quantized"] = flagged;
    d["text"] = audit::choice_text(c, budget, flagged);
    out.append(d);
  }
  return out;
}

std::vector<std::string> audit_formats_py(const std::vector<std::string>& globs) {
  std::vector<std::string> names;
  for (const FormatSpec* f : audit::formats(globs)) names.push_back(f->name);
  return names;
}

std::string audit_not_applicable_py(const std::string& format, std::size_t block_size, bool has_negative) {
  return audit::not_applicable(format_named(format), block_size, has_negative);
}

// The schema check of a case of a registered format: scope "inputs", "complete" or "present".
void validate_py(nb::handle tensors, nb::handle metadata, const std::string& origin, const std::string& scope) {
  const Case c = case_from_python(tensors, metadata, origin);
  const CaseScope s = scope == "inputs" ? CaseScope::Inputs : scope == "complete" ? CaseScope::Complete : CaseScope::Present;
  validate_case(format_named(c.format()), c, s);
}

// lowbit.verify's arguments as the engine's VerifyOptions (the package checked their types and ranges).
VerifyOptions verify_options(const FormatSpec& f, const std::vector<std::string>& inputs, int steps,
                             const std::string& policy_name, const std::string& policy_dir, bool strict,
                             const std::string& golden, const std::string& save_cases, int threads,
                             const std::string& params_json) {
  if (!golden.empty() && !std::filesystem::exists(std::filesystem::path(golden) / "MANIFEST.json"))
    throw std::invalid_argument("golden: '" + printable(golden) + "' holds no MANIFEST.json");
  VerifyOptions o;
  o.inputs = inputs;
  o.params = nlohmann::json::parse(params_json);  // json.dumps of a dict (lowbit.verify's param=)
  o.steps = steps;
  o.policy = load_tolerance_policy(policy_name.empty() ? f.default_tolerance : policy_name, policy_dir);
  o.policy.strict = strict;
  o.golden = golden;
  o.save_cases = save_cases;
  o.threads = threads;
  o.made_by = {std::string("lowbit ") + kVersion, std::string("lowbit-python verify ") + kVersion};
  return o;
}

// A Python exception that stops a verify run of a Python function: a BaseException that is not an
// Exception (KeyboardInterrupt, SystemExit, GeneratorExit from the kernel, or Ctrl-C between two cases,
// raised at the next call), which lowbit/_callable.py lets through. It is deliberately no std::exception,
// so that no handler of the engine takes it for an input's fault ("input 'edges': Traceback ..."): the
// engine's objects unwind (locks, files), and lowbit.verify raises the exception itself.
struct RunStopped {
  nb::python_error error;
};

// After each case: Ctrl-C (or another signal whose Python handler raises) that came while the engine
// ran, with no Python code to notice it, stops the run there, a plugin's as a function's.
void stop_if_signalled() {
  nb::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw RunStopped{nb::python_error()};
}

// The engine's verify on kernel k, with the lines `lowbit verify` prints as the cases come (each case
// and each skip, after `lines` already there): the report's JSON text, Markdown, verdict, summary, lines.
nb::tuple verified(const KernelUnderReview& k, const FormatSpec& f, const VerifyOptions& o, std::vector<std::string> lines) {
  VerifyEvents events;
  events.case_done = [&](const VerifiedCase&, const std::string& line) {
    lines.push_back(line);
    stop_if_signalled();
  };
  events.case_skipped = [&](const std::string& line) { lines.push_back(line); };
  VerifyReport r;
  std::optional<nb::python_error> stopped;
  {
    // a plugin's kernel runs in child processes, and an in-process one takes the GIL for its own calls
    nb::gil_scoped_release release;
    try {
      r = verify(k, f, o, events);
    } catch (const VerifyParamError& e) {
      throw std::invalid_argument("param " + e.param + ": " + e.why);
    } catch (RunStopped& s) {
      stopped.emplace(std::move(s.error));  // raised below, with the GIL held again
    }
  }
  if (stopped) throw std::move(*stopped);  // nanobind restores it: the same exception, its traceback kept
  return nb::make_tuple(r.json.dump(2), r.markdown, r.conformant, r.summary, lines);
}

// lowbit.verify on a plugin's kernel: the kernel and, for a CUDA-memory one, its runner and device, by the
// CLI's rules (kernel_choice.hpp).
nb::tuple verify_py(const std::string& library_path, const std::string& name, const std::string& format,
                    const std::vector<std::string>& inputs, int steps, const std::string& policy_name,
                    const std::string& policy_dir, bool strict, const std::string& golden, const std::string& save_cases,
                    double timeout, std::uint64_t memory, int threads, const std::string& cuda_runner,
                    const std::string& params_json) {
  const FormatSpec& f = format_named(format);
  VerifyOptions o =
      verify_options(f, inputs, steps, policy_name, policy_dir, strict, golden, save_cases, threads, params_json);
  std::vector<std::string> lines;
  KernelUnderReview kernel;
  try {
    nb::gil_scoped_release release;  // reading the plugin's table and probing a device run child processes
    const NamedPlugin p = open_plugin_kernel(library_path, name, timeout, memory);
    const PluginKernel k = choose_kernel(p, format);
    kernel = KernelUnderReview{p.library, k.name, timeout, {}, memory, {}};
    if (!k.host) {
      const CudaPlace place = find_cuda_place(k, p.library, cuda_runner, "", timeout);
      kernel.cuda_runner = place.runner;
      o.device = place.device;
      lines.push_back("device: " + device_text(place.device));  // as `lowbit verify` prints it first
    }
  } catch (const KernelChoiceError& e) {
    throw std::invalid_argument(e.below());
  }
  return verified(kernel, f, o, std::move(lines));
}

// A Python callable as the engine's in-process kernel (verify.hpp). `runner` (lowbit/_callable.py) takes
// the inputs as a case's Python form and the outputs to make as [(name, dtype, shape)], calls the user's
// function and returns (tensors, failure): the outputs' Python form, or a failure's text. What it returns
// is checked again here against the reference's names, dtypes and shapes. `runner` is a handle: the
// caller's frame keeps it alive, and copies of the kernel never touch its reference count.
InProcessKernel python_kernel(nb::handle runner, const std::string& format) {
  return [runner, format](const std::vector<const Tensor*>& inputs, const std::string& params_json,
                          const std::vector<const Tensor*>& like) {
    nb::gil_scoped_acquire gil;
    Case in;
    in.metadata = {{"format", format}, {"params", params_json}};
    for (const Tensor* t : inputs) in.add(*t);
    nb::list wanted;
    for (const Tensor* t : like) wanted.append(nb::make_tuple(t->name, std::string(dtype_name(t->dtype)), t->shape));
    nb::object returned;
    try {
      returned = runner(case_to_python(in), wanted);
    } catch (nb::python_error& e) {  // not the kernel's failure of a case (that comes back as text): stop
      throw RunStopped{std::move(e)};
    }
    const nb::tuple result = nb::cast<nb::tuple>(returned);
    KernelRun run;
    run.failure = nb::cast<std::string>(result[1]);
    if (!run.failure.empty()) return run;
    try {
      run.outputs = case_from_python(result[0], nb::dict(), "the function's outputs");
    } catch (const CaseError& e) {
      run.failure = e.what();
      return run;
    }
    for (const Tensor* t : like) {
      const Tensor* got = run.outputs.find(t->name);
      if (!got || got->dtype != t->dtype || got->shape != t->shape) {
        run.failure = "returned tensor '" + t->name + "' not as the format makes it";
        return run;
      }
    }
    run.completed = run.outputs.tensors().size() == like.size();
    if (!run.completed) run.failure = "returned tensors the format does not make";
    return run;
  };
}

// lowbit.verify on a Python callable, named `name` in the reports (its module and qualified name).
nb::tuple verify_callable_py(nb::object runner, const std::string& name, const std::string& format,
                             const std::vector<std::string>& inputs, int steps, const std::string& policy_name,
                             const std::string& policy_dir, bool strict, const std::string& golden,
                             const std::string& save_cases, int threads, const std::string& params_json) {
  const FormatSpec& f = format_named(format);
  const VerifyOptions o =
      verify_options(f, inputs, steps, policy_name, policy_dir, strict, golden, save_cases, threads, params_json);
  KernelUnderReview kernel;
  kernel.library = "Python function " + name;
  kernel.kernel = name;
  kernel.in_process = python_kernel(runner, format);
  return verified(kernel, f, o, {});
}

}  // namespace
}  // namespace lowbit::python

NB_MODULE(_core, m) {
  using namespace lowbit::python;
  m.doc() = "lowbit's C++ engine (use the lowbit package, not this module)";
  m.attr("__version__") = kVersion;
  // CaseError: a case file or case that fails the reader's or the schema's checks (a ValueError).
  nb::exception<lowbit::CaseError>(m, "CaseError", PyExc_ValueError);
  // PluginError: a plugin that cannot be used at all (no lowbit_plugin_v1, another ABI version, a bad table).
  nb::exception<lowbit::PluginError>(m, "PluginError", PyExc_RuntimeError);
  m.def("formats_json", &formats_json);
  m.def("resolved_params", &resolved_params, "format"_a, "params_json"_a);
  m.def("auxiliary_inputs", &auxiliary_inputs, "format"_a, "params_json"_a);
  m.def("run_reference", &run_reference_py, "tensors"_a, "metadata"_a, "origin"_a);
  m.def("compare", &compare_py, "e_tensors"_a, "e_meta"_a, "e_origin"_a, "a_tensors"_a, "a_meta"_a, "a_origin"_a,
        "policy"_a, "policy_dir"_a, "strict"_a, "max_listed"_a);
  m.def("default_tolerance", &default_tolerance, "format"_a);
  m.def("parse_case", &parse_case_py, "data"_a, "origin"_a);
  m.def("read_case", &read_case_py, "path"_a);
  m.def("serialize_case", &serialize_case_py, "tensors"_a, "metadata"_a, "origin"_a);
  m.def("battery", &battery, "format"_a, "steps"_a);
  m.def("dequantize", &dequantize_py, "tensors"_a, "metadata"_a, "origin"_a);
  m.def("dequantized_signature", &signature_py, "values"_a);
  m.def("sha256", &sha256_py, "data"_a);
  m.def("printable", &printable_py, "text"_a);
  m.def("unpack_nibbles", &unpack_nibbles_py, "packed"_a, "count"_a);
  m.def("audit", &audit_py, "format"_a, "x"_a, "block_size"_a, "threads"_a = 1);
  m.def("exact_round_trips", &exact_round_trips_py, "x"_a, "name"_a);
  m.def("choose", &choose_py, "rows"_a, "budget"_a);
  m.def("audit_formats", &audit_formats_py, "globs"_a);
  m.def("audit_not_applicable", &audit_not_applicable_py, "format"_a, "block_size"_a, "has_negative"_a);
  m.def("validate", &validate_py, "tensors"_a, "metadata"_a, "origin"_a, "scope"_a);
  m.def("verify", &verify_py, "library"_a, "name"_a, "format"_a, "inputs"_a, "steps"_a, "policy"_a, "policy_dir"_a,
        "strict"_a, "golden"_a, "save_cases"_a, "timeout"_a, "memory"_a, "threads"_a,
        "cuda_runner"_a, "params_json"_a);
  m.def("verify_callable", &verify_callable_py, "runner"_a, "name"_a, "format"_a, "inputs"_a, "steps"_a, "policy"_a,
        "policy_dir"_a, "strict"_a, "golden"_a, "save_cases"_a, "threads"_a, "params_json"_a);
}
