// lowbit audit: round-trip error of each registered format's reference quantize -> dequantize, per
// block size, on synthetic inputs and on the moments of a real optimizer state (docs/audit.md). A measurement,
// not a conformance check: exit 0 when it ran. The reports hold no timings and no thread count, so
// they are the same bytes for any --threads.
#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "command.hpp"
#include "number_option.hpp"
#include "lowbit/atomic_file.hpp"
#include "lowbit/audit.hpp"
#include "lowbit/audit_budget.hpp"
#include "lowbit/audit_exact.hpp"
#include "lowbit/audit_trajectory.hpp"
#include "lowbit/generators.hpp"
#include "lowbit/case.hpp"
#include "lowbit/kernel_cases.hpp"
#include "lowbit/manifest.hpp"
#include "lowbit/printable.hpp"
#include "kernel_option.hpp"
#include "progress.hpp"
#include "report_output.hpp"
#include "subcommand.hpp"
#include "threads_option.hpp"
#include "torch_checkpoint.hpp"

namespace lowbit::cli {

namespace {

// --trajectory --steps: every format's parameters after every step are kept for the report; 10^5
// steps need about 12 GiB and 25 minutes (docs/audit.md#memory)
constexpr int kMaxTrajectorySteps = 100000;

struct AuditOptions {
  std::vector<std::string> formats;
  std::vector<long long> block_sizes;
  std::vector<std::string> inputs;
  std::string state;
  std::vector<std::string> tensors;
  int threads = default_threads();
  ReportOutput output;
  std::string csv_path;
  std::string budget;  // METRIC=VALUE
  bool quiet = false;
  bool trajectory = false;
  int steps = 300;  // at most kMaxTrajectorySteps
  double lr = 1e-2;
  std::uint64_t seed = 1;
  std::string kernel;  // LIB[:NAME]: round trips through the plugin's kernels (kernel_cases.hpp)
  std::uint64_t check_elements = std::uint64_t{1} << 20;
  double timeout = 600;
  std::string kernel_memory;  // --kernel-memory (its default set with the option)
  nlohmann::json kernel_record;  // what the reports say of the plugin, its kernels and device
  bool kernel_options = false;   // --check-elements, --timeout or --kernel-memory given
};

// --kernel: the kernel that stands for each format's round trip, and how it runs.
struct RoundTripKernels {
  std::string library;
  std::map<std::string, PluginKernel> by_format;
  std::string cuda_runner;
};

// A configuration whose kernel outputs the reference refused: no report is written.
struct KernelRefused {
  std::string report;
};

struct Source {
  std::string name;           // the input spec, or FILE:tensor
  std::string state_tensor;   // non-empty: a tensor of the --state file
};

using audit::Row;

struct InputInfo {
  std::string name;
  std::size_t n = 0;
  bool is_signed = false;
  std::vector<audit::ExactRoundTrip> exact;  // non-empty: the values look already quantized
};

// Numbers for machines: shortest round-trip text; "inf" for an exact round trip's SQNR.
std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}
std::string short_num(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.4g}", v);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string to_csv(const std::vector<Row>& rows) {
  std::string out =
      "input,format,block_size,status,n,blocks,signed,mean_abs_error,mean_rel_error,rel_l2_error,max_abs_error,"
      "sqnr_db,nonzeros,flushed,flushed_fraction,worst_block,worst_block_mean_abs_error,bits_per_element,note\n";
  for (const Row& r : rows) {
    out += fmt::format("{},{},{},", csv_field(r.input), r.format->name, r.block);
    if (!r.note.empty()) {
      out += fmt::format("n/a,,,,,,,,,,,,,,,{}\n", csv_field(r.note));
      continue;
    }
    const audit::Metrics& m = r.m;
    out += fmt::format("ok,{},{},{},{},{},{},{},{},{},{},{},{},{},{},\n", m.n, m.blocks, m.is_signed ? 1 : 0,
                       num(m.mean_abs), num(m.mean_rel), num(m.rel_l2), num(m.max_abs), num(m.sqnr_db), m.nonzeros,
                       m.flushed, num(m.flushed_fraction), m.worst_block, num(m.worst_block_mean_abs),
                       num(m.bits_per_element));
  }
  return out;
}

// --kernel: which configurations ran on a kernel and which on the reference, per kernel.
std::string ran_on_text(const AuditOptions& o, const std::vector<Row>& rows, bool markdown) {
  std::map<std::string, std::string> lists;  // ran_on -> "format block, ..." over every input's rows, each once
  std::set<std::pair<std::string, std::size_t>> listed;
  for (const Row& r : rows) {
    if (!r.note.empty() || !listed.insert({r.format->name, r.block}).second) continue;
    std::string& list = lists[r.ran_on];
    list += fmt::format("{}{} {}", list.empty() ? "" : ", ", r.format->name, r.block);
  }
  std::string text = fmt::format("Kernels of {}{}: each configuration's head and tail blocks (or all of it) bit-identical "
                                 "to the reference before it was measured.\n",
                                 o.kernel_record.value("library", ""),
                                 o.kernel_record.contains("device") ? " on " + o.kernel_record["device"].get<std::string>() : "");
  for (const auto& [on, list] : lists) text += fmt::format("{}ran on the {}: {}\n", markdown ? "\n" : "  ", on, list);
  return markdown ? text : "  " + text;
}

// The warning of an already-quantized input, for stderr and the reports (name: the input's, as each writes it).
std::string exact_warning(const std::string& name, const InputInfo& in) { return audit::exact_warning(name, in.exact); }

// Whether the choice's configuration is one in which its input (or, for the overall choice, any input)
// looks already quantized: its error there is an artefact, which the choice must say.
bool choice_flagged(const audit::Choice& c, const std::vector<InputInfo>& inputs) {
  if (!c.best) return false;
  for (const InputInfo& in : inputs)
    if (c.input.empty() || c.input == in.name)
      for (const auto& e : in.exact)
        if (e.format == c.best->format && e.block_size == c.best->block) return true;
  return false;
}

std::string choice_text(const audit::Choice& c, const audit::Budget& b, const std::vector<InputInfo>& inputs) {
  return audit::choice_text(c, b, choice_flagged(c, inputs));
}

nlohmann::json choice_json(const audit::Choice& c, const audit::Budget& b, const std::vector<InputInfo>& inputs) {
  nlohmann::json j = {{"input", c.input.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.input)},
                      {"candidates", c.candidates}};
  if (!c.best) {
    j["format"] = nullptr;
    j["note"] = choice_text(c, b, inputs);
    return j;
  }
  const double e = audit::measure_of(c.best->m, b.metric);
  j["format"] = c.best->format->name;
  j["block_size"] = c.best->block;
  j["bits_per_element"] = c.best->m.bits_per_element;
  j[b.metric] = std::isinf(e) ? nlohmann::json(nullptr) : nlohmann::json(e);
  j["looks_already_quantized"] = choice_flagged(c, inputs);
  return j;
}

nlohmann::json to_json(const AuditOptions& o, const std::vector<InputInfo>& inputs, const std::vector<Row>& rows,
                       const std::optional<audit::Budget>& budget, const std::vector<audit::Choice>& choices) {
  nlohmann::json j = {{"tool", "lowbit"}, {"version", version()}, {"command", "audit"}};
  j["formats"] = nlohmann::json::array();
  for (const auto& f : o.formats) j["formats"].push_back(f);
  j["block_sizes"] = o.block_sizes;
  j["inputs"] = nlohmann::json::array();
  for (const InputInfo& i : inputs) {
    nlohmann::json in = {{"name", i.name}, {"n", i.n}, {"signed", i.is_signed}};
    in["exact_round_trips"] = nlohmann::json::array();
    for (const auto& e : i.exact)
      in["exact_round_trips"].push_back({{"format", e.format->name}, {"block_size", e.block_size},
                                         {"exact_blocks", e.exact_blocks}, {"blocks", e.blocks}});
    if (!i.exact.empty()) in["warning"] = exact_warning(i.name, i);
    j["inputs"].push_back(in);
  }
  if (!o.kernel.empty()) j["kernel"] = o.kernel_record;
  j["rows"] = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json row = {{"input", r.input}, {"format", r.format->name}, {"block_size", r.block}};
    if (!o.kernel.empty() && r.note.empty()) row["ran_on"] = r.ran_on;
    if (!r.note.empty()) {
      row["status"] = "n/a";
      row["note"] = r.note;
    } else {
      const audit::Metrics& m = r.m;
      row["status"] = "ok";
      row["n"] = m.n;
      row["blocks"] = m.blocks;
      row["mean_abs_error"] = m.mean_abs;
      row["mean_rel_error"] = m.mean_rel;
      row["rel_l2_error"] = m.rel_l2;
      row["max_abs_error"] = m.max_abs;
      row["sqnr_db"] = std::isinf(m.sqnr_db) ? nlohmann::json(nullptr) : nlohmann::json(m.sqnr_db);
      row["nonzeros"] = m.nonzeros;
      row["flushed"] = m.flushed;
      row["flushed_fraction"] = m.flushed_fraction;
      row["worst_block"] = {{"index", m.worst_block}, {"mean_abs_error", m.worst_block_mean_abs}};
      row["bits_per_element"] = m.bits_per_element;
    }
    j["rows"].push_back(row);
  }
  if (budget) {
    j["budget"] = {{"metric", budget->metric}, {"value", budget->value}, {"choices", nlohmann::json::array()}};
    for (const auto& c : choices) j["budget"]["choices"].push_back(choice_json(c, *budget, inputs));
  }
  return j;
}

std::string to_markdown(const AuditOptions& o, const std::vector<InputInfo>& inputs, const std::vector<Row>& rows,
                        const std::optional<audit::Budget>& budget, const std::vector<audit::Choice>& choices) {
  std::string joined;
  for (const auto& f : o.formats) joined += (joined.empty() ? "" : ", ") + f;
  std::string md = fmt::format("# Round-trip error audit\n\nlowbit {}; formats {}; block sizes", version(), joined);
  for (std::size_t k = 0; k < o.block_sizes.size(); ++k) md += fmt::format("{}{}", k ? ", " : " ", o.block_sizes[k]);
  md += ". Definitions of the measures: docs/audit.md.\n";
  if (!o.kernel.empty()) md += "\n" + ran_on_text(o, rows, true);
  if (budget) {
    md += fmt::format("\n## The fewest bits per element with {}\n\n| input | configuration |\n|---|---|\n", budget->text());
    for (const auto& c : choices)
      md += fmt::format("| {} | {} |\n", c.input.empty() ? std::string("every input (one configuration for all)") : markdown_code(c.input),
                        choice_text(c, *budget, inputs));
  }
  for (const InputInfo& in : inputs) {
    md += fmt::format("\n## {}\n\n{} values, {}.\n", markdown_code(in.name), in.n,  // FILE:tensor names from a file
                      in.is_signed ? "with negative values" : "non-negative (COAT's second-moment path)");
    if (!in.exact.empty()) md += fmt::format("\n**Warning:** {}.\n", exact_warning(markdown_code(in.name), in));
    const auto wide = [&](const std::string& title, auto value) {
      md += fmt::format("\n{}:\n\n| format |", title);
      for (long long b : o.block_sizes) md += fmt::format(" {} |", b);
      md += "\n|---|";
      for (std::size_t k = 0; k < o.block_sizes.size(); ++k) md += "---:|";
      md += "\n";
      for (const auto& f : o.formats) {
        md += fmt::format("| {} |", f);
        for (const Row& r : rows)
          if (r.input == in.name && r.format->name == f)
            md += r.note.empty() ? fmt::format(" {} |", value(r.m)) : " n/a |";
        md += "\n";
      }
    };
    wide("Mean absolute error", [](const audit::Metrics& m) { return short_num(m.mean_abs); });
    wide("SQNR (dB)", [](const audit::Metrics& m) { return fmt::format("{:.2f}", m.sqnr_db); });
    wide("Bits per element (codes, scales and side tensors)", [](const audit::Metrics& m) { return short_num(m.bits_per_element); });
    md += "\nAll measures:\n\n| format | block | bits/elt | mean abs | mean rel (bnb) | rel L2 | max abs | SQNR dB | flushed "
          "| worst block (mean abs) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    std::map<std::string, std::string> not_run;  // note -> "format block, ..."
    for (const Row& r : rows) {
      if (r.input != in.name) continue;
      if (!r.note.empty()) {
        std::string& list = not_run[r.note];
        list += fmt::format("{}{} {}", list.empty() ? "" : ", ", r.format->name, r.block);
        continue;
      }
      const audit::Metrics& m = r.m;
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {:.2f} | {} / {} | {} ({}) |\n", r.format->name,
                        r.block, short_num(m.bits_per_element), short_num(m.mean_abs), short_num(m.mean_rel), short_num(m.rel_l2), short_num(m.max_abs),
                        m.sqnr_db, m.flushed, m.nonzeros, m.worst_block, short_num(m.worst_block_mean_abs));
    }
    for (const auto& [note, list] : not_run) md += fmt::format("\n{}: {}.\n", note, list);
  }
  return md;
}

std::vector<float> tensor_values(const Tensor& t, const std::string& file) {
  if (t.dtype == DType::F32) return t.f32();
  if (t.dtype == DType::F16 || t.dtype == DType::BF16) {
    const std::vector<std::uint16_t> bits = t.u16();
    std::vector<float> out(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) out[i] = float_of_bits(t.dtype, bits[i]);
    return out;
  }
  throw UsageError(fmt::format("{}: tensor '{}' is {}; the audit reads F32, BF16 and F16", file, t.name,
                               dtype_name(t.dtype)));
}


// --formats: registry names and globs as conform --format takes them (default: every format with
// the hook); a name or glob that matches none is a usage error listing what exists.
std::vector<const FormatSpec*> selected(const std::vector<std::string>& globs,
                                        std::vector<const FormatSpec*> (*with_hook)(const std::vector<std::string>&)) {
  try {
    return with_hook(globs);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--formats: {}", e.what()));
  }
}

// --csv is checked before the work starts, like --report, and against the reports' paths (after
// ReportOutput::prepare has derived the Markdown one): one file for both was written, then the
// second write refused, after the whole run.
void check_csv_path(const std::string& path, const ReportOutput& output) {
  if (path.empty()) return;
  for (const std::string& report : {output.json_path, output.markdown_path})
    if (!report.empty() && same_file(path, report))
      throw UsageError("--csv and a report would both be written to '" + path + "'; give them different files");
  try {
    ensure_writable(path);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

// ---- --trajectory: the report of audit_trajectory.hpp's runs -------------------------------------

struct TrajectoryRow {
  int step;
  std::string format;
  double loss, distance, relative_distance;
};

int run_trajectory(AuditOptions o) {
  if (!(o.lr > 0) || !std::isfinite(o.lr)) throw UsageError(fmt::format("--lr must be positive (got {})", o.lr));
  std::vector<const FormatSpec*> formats = selected(o.formats, audit::trajectory_formats);
  // every run is measured against the baseline's: it always runs, first
  const FormatSpec* baseline = find_format(audit::kTrajectoryBaseline);
  std::erase(formats, baseline);
  formats.insert(formats.begin(), baseline);
  o.output.prepare();
  check_csv_path(o.csv_path, o.output);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<audit::TrajectoryPoint>> runs(formats.size());
  const auto count = static_cast<long long>(formats.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(o.threads)
  for (long long k = 0; k < count; ++k) {
    const auto i = static_cast<std::size_t>(k);
    runs[i] = audit::run_trajectory(o.seed, *formats[i], o.steps, o.lr);
  }
  std::vector<TrajectoryRow> rows;
  for (int t = 0; t <= o.steps; ++t) {
    const auto ts = static_cast<std::size_t>(t);
    const auto& ref = runs[0][ts].w;
    double ref2 = 0;
    for (float r : ref) ref2 += static_cast<double>(r) * r;
    for (std::size_t k = 0; k < formats.size(); ++k) {
      double d2 = 0;
      for (std::size_t i = 0; i < ref.size(); ++i) {
        const double d = static_cast<double>(runs[k][ts].w[i]) - ref[i];
        d2 += d * d;
      }
      rows.push_back({t, formats[k]->name, runs[k][ts].loss, std::sqrt(d2), ref2 > 0 ? std::sqrt(d2 / ref2) : 0.0});
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::string csv = "step,format,loss,param_distance,relative_param_distance\n";
  for (const auto& r : rows)
    csv += fmt::format("{},{},{},{},{}\n", r.step, r.format, num(r.loss), num(r.distance), num(r.relative_distance));
  std::vector<int> marks;
  for (int t : {0, 1, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000})
    if (t < o.steps) marks.push_back(t);
  marks.push_back(o.steps);
  std::string md = fmt::format(
      "# AdamW trajectories with quantized states\n\nLeast squares (docs/audit.md): X 512x64 with column scales "
      "exp(N(0,1)), W 64x64 from 0, seed {}, lr {}, betas (0.9, 0.999), eps 1e-8, no weight decay, {} steps; "
      "each format's fused step on the reference, one case per step. Loss, and in brackets ||W - W_base|| / ||W_base|| "
      "with W_base the {} run:\n\n| format |",
      o.seed, o.lr, o.steps, audit::kTrajectoryBaseline);
  for (int t : marks) md += fmt::format(" step {} |", t);
  md += "\n|---|";
  for (std::size_t k = 0; k < marks.size(); ++k) md += "---:|";
  md += "\n";
  nlohmann::json j = {{"tool", "lowbit"}, {"version", version()}, {"command", "audit --trajectory"},
                      {"seed", o.seed},    {"lr", o.lr},            {"steps", o.steps},
                      {"baseline", audit::kTrajectoryBaseline}};
  j["formats"] = nlohmann::json::array();
  for (std::size_t k = 0; k < formats.size(); ++k) {
    md += fmt::format("| {} |", formats[k]->name);
    nlohmann::json loss = nlohmann::json::array(), dist = nlohmann::json::array();
    for (int t = 0; t <= o.steps; ++t) {
      const TrajectoryRow& r = rows[static_cast<std::size_t>(t) * formats.size() + k];
      loss.push_back(r.loss);
      dist.push_back(r.relative_distance);
      if (std::find(marks.begin(), marks.end(), t) != marks.end())
        md += fmt::format(" {} ({}) |", short_num(r.loss), short_num(r.relative_distance));
    }
    md += "\n";
    j["formats"].push_back({{"name", formats[k]->name}, {"loss", loss}, {"relative_param_distance", dist}});
  }
  for (std::size_t k = 0; k < formats.size(); ++k) {
    const TrajectoryRow& r = rows[static_cast<std::size_t>(o.steps) * formats.size() + k];
    fmt::print("  {:<24} loss {:<12} distance to {} {}\n", formats[k]->name, short_num(r.loss),
               audit::kTrajectoryBaseline, short_num(r.relative_distance));
  }
  fmt::print("audit --trajectory: {} formats x {} steps in {:.1f} s on {} thread(s)\n", formats.size(), o.steps,
             seconds, o.threads);
  std::vector<std::pair<std::string, std::string>> csv_file;
  if (!o.csv_path.empty()) csv_file.emplace_back(o.csv_path, csv);
  o.output.write(j.dump(2) + "\n", md, csv_file);
  return kConformant;
}

// --kernel: the plugin's kernels, one per format (LIB:NAME picks one), and the CUDA device when one
// takes CUDA memory; recorded in o.kernel_record for the reports.
RoundTripKernels pick_round_trip_kernels(AuditOptions& o) {
  check_kernel_timeout(o.timeout);
  kernel_memory_bytes(o.kernel_memory);
  if (o.check_elements < 1) throw UsageError("--check-elements must be at least 1");
  RoundTripKernels k;
  for (const PluginKernel& p : pick_kernels(o.kernel, o.timeout, k.library)) {
    if (k.by_format.contains(p.format))
      throw UsageError("--kernel: " + k.library + " holds two kernels of " + p.format + " ('" + k.by_format.at(p.format).name +
                       "', '" + p.name + "'); name one as LIB:NAME");
    k.by_format.emplace(p.format, p);
  }
  note_input_file(k.library);
  o.kernel_record = {{"library", library_identity(k.library)}, {"kernels", nlohmann::json::object()}};
  for (const auto& [format, p] : k.by_format) o.kernel_record["kernels"][format] = p.name;
  for (const auto& [format, p] : k.by_format)
    if (!p.host) {
      const CudaDevice device = cuda_device_for(p, k.library, o.timeout, k.cuda_runner);
      fmt::print("device: {}\n", device_text(device));
      o.kernel_record["device"] = device_text(device);
      break;
    }
  return k;
}

int run_audit(AuditOptions o) {
  if (o.kernel.empty() && o.kernel_options) throw UsageError("--check-elements, --timeout and --kernel-memory apply with --kernel only");
  if (o.trajectory && !o.kernel.empty())
    throw UsageError("--kernel measures round trips; --trajectory runs the reference's optimizer steps only");
  if (o.trajectory) return run_trajectory(std::move(o));
  const std::vector<const FormatSpec*> formats = selected(o.formats, audit::formats);
  o.formats.clear();  // the names, globs expanded
  for (const FormatSpec* f : formats) o.formats.push_back(f->name);
  if (o.block_sizes.empty())
    for (long long b = 32; b <= 4096; b *= 2) o.block_sizes.push_back(b);
  for (long long b : o.block_sizes)
    if (b < static_cast<long long>(audit::kMinBlock) || b > static_cast<long long>(audit::kMaxBlock) || (b & (b - 1)))
      throw UsageError(fmt::format("--block-sizes: {} is not a power of two in {}..{}", b, audit::kMinBlock,
                                   audit::kMaxBlock));
  for (const auto& spec : o.inputs) {
    try {
      audit::check_input(spec);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--input: {}", e.what()));
    }
  }
  if (!o.tensors.empty() && o.state.empty()) throw UsageError("--tensors needs --state FILE");
  std::optional<RoundTripKernels> kernels;
  if (!o.kernel.empty()) kernels = pick_round_trip_kernels(o);
  std::optional<audit::Budget> budget;
  if (!o.budget.empty()) {
    try {
      budget = audit::parse_budget(o.budget);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--budget: {}", e.what()));
    }
  }
  o.output.prepare();
  check_csv_path(o.csv_path, o.output);

  std::vector<Source> sources;
  for (const auto& spec : o.inputs) sources.push_back({spec, ""});
  Case state;
  if (!o.state.empty()) {
    refuse_torch_checkpoint(o.state, "lowbit audit --state states.safetensors --tensors KEYS (the keys it prints)",
                            true);
    state = read_case_guarded(o.state);  // held to its MANIFEST.json where one lists it; CaseError names the fault
    if (o.tensors.empty()) {
      for (const Tensor& t : state.tensors()) {
        if (t.name.find("exp_avg") == std::string::npos) continue;
        if (t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16)
          sources.push_back({o.state + ":" + t.name, t.name});
        else  // e.g. the codes of an already quantized state
          fmt::print(stderr, "lowbit: note: {}: skipping '{}' ({}, not F32/BF16/F16)\n", printable(o.state), printable(t.name),
                     dtype_name(t.dtype));
      }
      if (sources.size() == o.inputs.size()) {
        std::string names;
        for (const Tensor& t : state.tensors()) names += (names.empty() ? "" : ", ") + t.name;
        throw UsageError(fmt::format("{}: no tensor whose name contains exp_avg (tensors: {}); name them with --tensors",
                                     o.state, names.empty() ? "none" : names));
      }
    } else {
      for (const auto& name : o.tensors) {
        if (!state.find(name)) throw UsageError(fmt::format("{}: no tensor named '{}'", o.state, name));
        sources.push_back({o.state + ":" + name, name});
      }
    }
  }
  if (sources.empty()) sources.push_back({"normal:n=1048576,seed=1", ""});

  std::vector<Row> rows;
  std::vector<InputInfo> infos;
  std::uint64_t total = 0, done = 0;
  Progress progress("audit", o.quiet);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    for (std::size_t s = 0; s < sources.size(); ++s) {
      const Source& src = sources[s];
      std::vector<float> x;
      if (src.state_tensor.empty()) {
        try {
          x = audit::make_input(src.name, o.threads);
        } catch (const std::invalid_argument& e) {
          throw UsageError(fmt::format("--input: {}", e.what()));
        } catch (const std::bad_alloc&) {
          throw UsageError(fmt::format("--input '{}': out of memory making its values (docs/audit.md#memory)", src.name));
        }
      } else {
        x = tensor_values(state.require(src.state_tensor), o.state);
      }
      if (s == 0) total = static_cast<std::uint64_t>(sources.size()) * formats.size() * o.block_sizes.size();
      bool is_signed = false;
      for (float v : x) is_signed = is_signed || v < 0.0f;
      infos.push_back({src.name, x.size(), is_signed, {}});
      try {  // every format with a round trip, at every block size: an already quantized state is flagged whatever was asked
        infos.back().exact = audit::exact_round_trips(x, audit::formats());
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("{}: {}", src.name, e.what()));
      }
      if (!infos.back().exact.empty())
        fmt::print(stderr, "lowbit: warning: {}\n", printable(exact_warning(infos.back().name, infos.back())));
      audit::Input input;  // checked once for every configuration
      try {
        input = audit::checked_input(x);
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("{}: {}", src.name, e.what()));
      }
      for (const FormatSpec* f : formats)
        for (long long b : o.block_sizes) {
          const auto block = static_cast<std::size_t>(b);
          // no values, no measures: n/a, not an error of 0 and an SQNR of 0
          Row r{src.name, f, block,
                x.empty() ? std::string("no values to measure (0 elements)") : audit::not_applicable(*f, block, is_signed),
                {}};
          const auto kernel = kernels ? kernels->by_format.find(f->name) : decltype(kernels->by_format)::iterator{};
          if (r.note.empty() && kernels && kernel != kernels->by_format.end() && kernel_round_trips(*f)) {
            r.ran_on = "kernel " + kernel->second.name;
            const KernelUnderReview k{kernels->library, kernel->second.name, o.timeout, kernels->cuda_runner,
                                      kernel_memory_bytes(o.kernel_memory), {}};
            try {
              r.m = audit::audit(*f, x, r.block, o.threads, [&](std::span<const float> xs, std::size_t b) {
                std::vector<float> xh;
                const KernelCase kc = kernel_round_trip(k, *f, xs, b, o.check_elements, xh);
                const std::string what = fmt::format("{} {} block {}", src.name, f->name, b);
                if (!kc.trusted()) throw KernelRefused{refusal_lines(what, k.kernel, kc)};
                fmt::print("{}\n", checked_line(what, k.kernel, kc));
                std::fflush(stdout);
                return xh;
              });
            } catch (const std::invalid_argument& e) {
              throw UsageError(fmt::format("{}: {}", src.name, e.what()));
            } catch (const std::bad_alloc&) {
              throw UsageError(fmt::format("{}: out of memory auditing {} (docs/audit.md#memory)", src.name, f->name));
            }
          } else if (r.note.empty()) {
            try {
              r.m = audit::audit(*f, input, r.block, o.threads);
            } catch (const std::invalid_argument& e) {
              throw UsageError(fmt::format("{}: {}", src.name, e.what()));
            } catch (const std::bad_alloc&) {
              throw UsageError(fmt::format("{}: out of memory auditing {} (docs/audit.md#memory)", src.name, f->name));
            }
          }
          rows.push_back(std::move(r));
          progress.update(++done, total);
        }
    }
  } catch (const KernelRefused& refused) {
    progress.finish();
    fmt::print("{}audit: kernel refused (above); no report written\n", refused.report);
    return kNotConformant;
  }
  progress.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // People: the mean absolute errors, one line per input and format, its bits per element below.
  for (const InputInfo& in : infos) {
    fmt::print("{} ({} values)\n", printable(in.name), in.n);
    for (const auto& f : o.formats) {
      std::string line = fmt::format("  {:<28}", f), bits = fmt::format("  {:<28}", "  bits per element");
      for (const Row& r : rows)
        if (r.input == in.name && r.format->name == f) {
          line += fmt::format(" {:>4}:{:<10}", r.block, r.note.empty() ? short_num(r.m.mean_abs) : "n/a");
          bits += fmt::format(" {:>4}:{:<10}", r.block, r.note.empty() ? short_num(r.m.bits_per_element) : "n/a");
        }
      fmt::print("{}\n{}\n", line, bits);
    }
    if (!in.exact.empty()) fmt::print("  warning: {}\n", printable(exact_warning(in.name, in)));
  }
  std::vector<audit::Choice> choices;
  if (budget) {
    choices = audit::choose(rows, *budget);
    fmt::print("fewest bits per element with {}:\n", budget->text());
    for (const auto& c : choices)
      fmt::print("  {}: {}\n", c.input.empty() ? std::string("every input") : printable(c.input), choice_text(c, *budget, infos));
  }
  if (kernels) fmt::print("{}", ran_on_text(o, rows, false));
  fmt::print("audit: {} rows in {:.1f} s on {} thread(s)\n", rows.size(), seconds, o.threads);
  std::vector<std::pair<std::string, std::string>> csv_file;
  if (!o.csv_path.empty()) csv_file.emplace_back(o.csv_path, to_csv(rows));
  o.output.write(to_json(o, infos, rows, budget, choices).dump(2) + "\n", to_markdown(o, infos, rows, budget, choices),
                 csv_file);
  return kConformant;
}

}  // namespace

Subcommand add_audit_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "audit",
      "Round-trip error (quantize -> dequantize with the reference) per registered format and block size, on synthetic\n"
      "inputs and on the moments of a saved optimizer state: mean absolute and relative error, relative L2, max error,\n"
      "SQNR, values flushed to zero, worst block (docs/audit.md). A measurement: exit 0 when it ran.");
  auto o = std::make_shared<AuditOptions>();
  cmd->add_option("--formats", o->formats,
                  "Comma-separated registry names or globs, as conform --format takes them (e.g. "
                  "'torchao.codebook8.*'). Default: every format with a round trip; with --trajectory every optimizer "
                  "format (torchao.adam.dense, the baseline, always runs)")
      ->delimiter(',');
  cmd->add_option("--block-sizes", o->block_sizes,
                  "Comma-separated powers of two in 16..65536 (default 32,64,...,4096); a format that does not run at a "
                  "size is reported n/a")
      ->delimiter(',');
  cmd->add_option("--input", o->inputs,
                  "Input specs (one or more), the kinds of golden generate but edges: normal|uniform|lognormal|student-t|"
                  "constant|outliers|adam-m|adam-v:key=value,... (adam-m, adam-v: synthetic AdamW moments, keys n, seed, "
                  "steps, std, spread), or file:PATH[:TENSOR] (a tensor of a safetensors file, flattened). Default "
                  "normal:n=1048576,seed=1 when no --state");
  cmd->add_option("--state", o->state, "A safetensors optimizer state: audits every tensor whose name contains exp_avg");
  cmd->add_option("--tensors", o->tensors, "Comma-separated tensor names of --state to audit instead")->delimiter(',');
  add_threads_option(*cmd, o->threads);
  cmd->add_option("--csv", o->csv_path, "Write one CSV row per input, format and block size here");
  cmd->add_option("--budget", o->budget,
                  "METRIC=VALUE (metric mean_abs, mean_rel, rel_l2, max_abs: at most VALUE; sqnr_db: at least VALUE): "
                  "name, per input and for all inputs, the format and block size with the fewest bits per element "
                  "within it, or say that none is");
  o->output.add_options(*cmd);
  cmd->add_flag("--quiet,-q", o->quiet, "No progress on stderr");
  cmd->add_flag("--trajectory", o->trajectory,
                "Instead: train a least-squares problem with each registered optimizer format (torchao Adam on dense, "
                "8-bit, 4-bit and FP8 states, bitsandbytes 8-bit, COAT FP8 with and without expansion); loss and "
                "distance to the dense float32 run per step (--csv, --report, --markdown)");
  cmd->add_option("--kernel", o->kernel,
                  "A plugin (include/lowbit/kernel_plugin.h), LIB or LIB:NAME: each format it has a quantizer kernel\n"
                  "for round-trips through that kernel (host or CUDA memory, in a child process) instead of the reference,\n"
                  "once its head and tail blocks (or all of it, --check-elements) are bit-identical to the reference's;\n"
                  "the other formats run on the reference. The reports say which ran where");
  add_whole_option(*cmd, "--check-elements", o->check_elements, std::uint64_t{1}, kMaxCheckElements,
                   "--kernel: an input of at most this many elements is checked whole, a larger one on its first and last\n"
                   "blocks, this many elements together");
  add_real_option(*cmd, "--timeout", o->timeout, kMinKernelTimeout, kMaxKernelTimeout, "--kernel: seconds a kernel may take per configuration");
  add_kernel_memory_option(*cmd, o->kernel_memory);
  add_whole_option(*cmd, "--steps", o->steps, 1, kMaxTrajectorySteps, "--trajectory: optimizer steps");
  add_real_option(*cmd, "--lr", o->lr, 0.0, 1e6, "--trajectory: learning rate");
  // the problem draws its four arrays with seeds seed .. seed + 3, each a generator seed (at most 2^53)
  add_whole_option(*cmd, "--seed", o->seed, std::uint64_t{0}, static_cast<std::uint64_t>(kMaxSeed) - 3,
                   "--trajectory: the problem's seed");
  return {cmd, [o, cmd] {
            o->kernel_options = cmd->get_option("--check-elements")->count() + cmd->get_option("--timeout")->count() +
                                cmd->get_option("--kernel-memory")->count() > 0;
            return run_audit(*o);
          }};
}

}  // namespace lowbit::cli
