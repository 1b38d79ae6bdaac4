// A kernel's outputs, trusted only after a sample of them equals the reference's (kernel_cases.hpp).
#include "lowbit/kernel_cases.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <stdexcept>

#include "lowbit/plugin_host.hpp"
#include "lowbit/printable.hpp"
#include "lowbit/schema.hpp"

namespace lowbit {

namespace {

// What becomes of a tensor when a case is cut to elements [begin, end) of its root.
enum class Cut {
  Elements,  // the root, or one element per root element: [begin, end)
  Blocks,    // one entry per block of `block` root elements: the blocks [begin, end) touches
  Packed,    // two codes a byte: [begin / 2, ceil(end / 2))
  Whole,     // a scalar or a table: kept
};

struct TensorCut {
  Cut kind = Cut::Whole;
  std::size_t block = 1;  // Blocks: root elements per entry
};

std::vector<const TensorSpec*> declared(const FormatSpec& f) {
  std::vector<const TensorSpec*> all;
  for (const auto* list : {&f.inputs, &f.optional_inputs, &f.outputs})
    for (const TensorSpec& t : *list) all.push_back(&t);
  return all;
}

bool is_input(const FormatSpec& f, const std::string& name) {
  return std::find(f.inputs.begin(), f.inputs.end(), name) != f.inputs.end() ||
         std::find(f.optional_inputs.begin(), f.optional_inputs.end(), name) != f.optional_inputs.end();
}

std::string root_of(const FormatSpec& f) {
  if (f.fresh_state) return "param";
  return std::find(f.inputs.begin(), f.inputs.end(), "input") != f.inputs.end() ? "input" : "";
}

// The block of a per-element tensor's flat layout in elements: 1 when it is not blocked (no scales);
// nullopt for a 2-D layout, a per-tensor scale or a block of the whole axis.
std::optional<std::size_t> flat_block(const Layout& l, const nlohmann::json& params) {
  if (l.matrix) return std::nullopt;
  const Extent& e = l.columns;
  if (e.count > 0) return static_cast<std::size_t>(e.count);
  if (e.param.empty()) return l.scales.empty() ? std::optional<std::size_t>(1) : std::nullopt;
  const std::int64_t v = extent_param(e, params);
  if (v <= 0) return std::nullopt;
  return static_cast<std::size_t>(v / e.per_stored);
}

// Every declared tensor's cut, or nullopt when one cannot be cut (slicing() says which).
std::optional<std::map<std::string, TensorCut>> cuts_of(const FormatSpec& f, const nlohmann::json& params,
                                                        std::size_t& unit) {
  const std::string root = root_of(f);
  if (root.empty()) return std::nullopt;
  std::map<std::string, TensorCut> cuts;
  std::map<std::string, std::size_t> blocks;  // per-element tensors: their layout's block
  unit = 1;
  const auto elements = [&](const TensorSpec& t) {
    const std::optional<std::size_t> b = flat_block(t.layout, params);
    if (!b) return false;
    blocks[t.name] = *b;
    unit = std::lcm(unit, *b);
    cuts[t.name] = {Cut::Elements, 1};
    return true;
  };
  const std::vector<const TensorSpec*> all = declared(f);
  for (std::size_t resolved = 0, pass = 0; pass <= all.size(); ++pass) {
    for (const TensorSpec* t : all) {
      if (cuts.contains(t->name)) continue;
      const ShapeRule& rule = t->schema.shape;
      const bool of_elements = !rule.of.empty() && blocks.contains(rule.of);
      if (t->name == root) {
        if (rule.kind != ShapeRule::Kind::Any || rule.rank > 1 || !elements(*t)) return std::nullopt;
      } else if (rule.kind == ShapeRule::Kind::Scalar || rule.kind == ShapeRule::Kind::Entries) {
        cuts[t->name] = {Cut::Whole, 1};
      } else if ((rule.kind == ShapeRule::Kind::SameShape || rule.kind == ShapeRule::Kind::SameCount) && of_elements) {
        if (!elements(*t)) return std::nullopt;
      } else if (rule.kind == ShapeRule::Kind::BlockEntries && of_elements) {
        cuts[t->name] = {Cut::Blocks, blocks.at(rule.of)};
      } else if (rule.kind == ShapeRule::Kind::Packed && of_elements) {
        cuts[t->name] = {Cut::Packed, 1};
        unit = std::lcm(unit, std::size_t{2});
      }
    }
    if (cuts.size() == resolved) break;  // nothing new this pass
    resolved = cuts.size();
  }
  if (cuts.size() != all.size()) return std::nullopt;  // any shape, transposed, or following such a tensor
  return cuts;
}

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// The range of a tensor's elements that root elements [begin, end) hold.
std::pair<std::size_t, std::size_t> range_of(const TensorCut& c, std::size_t count, std::size_t begin, std::size_t end) {
  switch (c.kind) {
    case Cut::Elements: return {begin, end};
    case Cut::Blocks: return {begin / c.block, ceil_div(end, c.block)};
    case Cut::Packed: return {begin / 2, ceil_div(end, 2)};
    case Cut::Whole: break;
  }
  return {0, count};
}

TolerancePolicy strict_bit_exact() {
  TolerancePolicy p;  // bit-exact
  p.strict = true;
  return p;
}

// The outputs the harness allocates for the whole case, from the reference's outputs on a sample of
// it: dtypes and the shapes of tensors kept whole from the sample; each cut tensor's element count
// from the root's (a per-element tensor the shape of the tensor it has the shape of, else flat).
std::vector<Tensor> whole_outputs(const FormatSpec& f, const std::map<std::string, TensorCut>& cuts, const Case& inputs,
                                  const Case& sample, std::size_t n) {
  std::vector<Tensor> out;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const Tensor& t : inputs.tensors()) shapes[t.name] = t.shape;
  for (const TensorSpec& spec : f.outputs) {
    const Tensor& s = sample.require(spec.name);
    const TensorCut& c = cuts.at(spec.name);
    Tensor t{spec.name, s.dtype, s.shape, {}};
    if (c.kind != Cut::Whole) {
      const auto [lo, hi] = range_of(c, 0, 0, n);
      t.shape = {static_cast<std::int64_t>(hi - lo)};
      if (spec.schema.shape.kind == ShapeRule::Kind::SameShape && c.kind == Cut::Elements)
        t.shape = shapes.at(spec.schema.shape.of);
    }
    shapes[spec.name] = t.shape;
    t.bytes.assign(static_cast<std::size_t>(t.element_count()) * dtype_size(t.dtype), 0);
    out.push_back(std::move(t));
  }
  return out;
}

// Runs the kernel on the format's inputs of `inputs`, outputs shaped like `like`; the case made
// (inputs and outputs, the metadata of `inputs`) or the failure.
KernelRun run_on(const KernelUnderReview& k, const FormatSpec& f, const Case& inputs, const std::vector<const Tensor*>& like,
                 const nlohmann::json& params) {
  std::vector<const Tensor*> in;
  for (const Tensor& t : inputs.tensors())
    if (is_input(f, t.name)) in.push_back(&t);
  return run_plugin_kernel(k.library, k.kernel, in, params.dump(), like, k.timeout_seconds, k.cuda_runner, k.memory_bytes);
}

std::string range_text(std::size_t begin, std::size_t end) { return fmt::format("[{}, {})", begin, end); }

}  // namespace

std::optional<Slicing> slicing(const FormatSpec& f, const nlohmann::json& params) {
  std::size_t unit = 1;
  if (!cuts_of(f, params, unit)) return std::nullopt;
  return Slicing{root_of(f), unit};
}

Case slice_case(const FormatSpec& f, const Case& c, const Slicing& s, const nlohmann::json& params, std::size_t begin,
                std::size_t end) {
  std::size_t unit = 1;
  const auto cuts = cuts_of(f, params, unit);
  if (!cuts || unit != s.unit) throw std::invalid_argument("slice_case: format " + f.name + " is not cut so");
  const std::size_t n = c.require(s.root).element_count();
  if (begin >= end || end > n || begin % unit != 0 || (end % unit != 0 && end != n))
    throw std::invalid_argument("slice_case: elements " + range_text(begin, end) + " of " + std::to_string(n) +
                                " are not whole units of " + std::to_string(unit));
  Case out;
  out.metadata = c.metadata;
  out.origin = c.origin + " elements " + range_text(begin, end);
  for (const Tensor& t : c.tensors()) {
    const auto cut = cuts->find(t.name);
    if (cut == cuts->end() || cut->second.kind == Cut::Whole) {
      out.add(t);
      continue;
    }
    const auto [lo, hi] = range_of(cut->second, t.element_count(), begin, end);
    const std::size_t size = dtype_size(t.dtype);
    if (hi > t.element_count())
      throw std::invalid_argument("slice_case: tensor '" + t.name + "' has " + std::to_string(t.element_count()) +
                                  " elements, fewer than " + std::to_string(hi));
    out.add(Tensor::from_bytes(t.name, t.dtype, {static_cast<std::int64_t>(hi - lo)},
                               std::span<const std::uint8_t>(t.bytes).subspan(lo * size, (hi - lo) * size)));
  }
  return out;
}

bool KernelCase::trusted() const {
  return failure.empty() && !checks.empty() &&
         std::all_of(checks.begin(), checks.end(), [](const SampleCheck& c) { return c.report.conformant; });
}

std::string KernelCase::sample_text() const {
  if (checked >= elements) return "every element";
  std::string parts;
  for (const SampleCheck& c : checks) parts += (parts.empty() ? "" : " and ") + c.label;
  return parts + " of " + std::to_string(elements);
}

KernelCase run_checked_kernel(const KernelUnderReview& k, const FormatSpec& f, const Case& inputs,
                              std::uint64_t check_elements) {
  const nlohmann::json params = resolve_params(f, inputs.params());
  const std::string root = root_of(f);
  KernelCase r;
  r.elements = root.empty() ? 0 : inputs.require(root).element_count();
  std::size_t unit = 1;
  const auto cuts = cuts_of(f, params, unit);
  const TolerancePolicy policy = strict_bit_exact();
  const auto finish_run = [&](KernelRun run) {
    if (!run.completed) {
      r.failure = run.failure;
      return false;
    }
    r.kernel_ms = run.kernel_ms;
    r.made = inputs;
    for (Tensor& t : run.outputs.take_tensors()) r.made.add(std::move(t));
    r.made.origin = "kernel " + k.kernel + " on " + inputs.origin;
    return true;
  };

  if (!cuts || r.elements <= check_elements) {  // the whole case, against the reference's
    const Case expected = run_reference(f, inputs);
    std::vector<const Tensor*> like;
    for (const Tensor& t : expected.tensors())
      if (!is_input(f, t.name)) like.push_back(&t);
    if (!finish_run(run_on(k, f, inputs, like, params))) return r;
    r.checks.push_back({r.elements ? "all " + std::to_string(r.elements) + " elements" : "the whole case",
                        compare_cases(expected, r.made, policy)});
    r.checked = r.elements;
    return r;
  }

  // head and tail: whole units, at least one each, together about check_elements
  const Slicing s{root, unit};
  const std::size_t n = static_cast<std::size_t>(r.elements);
  const std::size_t half = std::max<std::size_t>(unit, ceil_div(static_cast<std::size_t>(check_elements / 2), unit) * unit);
  const std::size_t head_end = std::min(half, n);
  const std::size_t tail_begin = std::max(head_end, n > half ? (n - half) / unit * unit : 0);
  const Case head_expected = run_reference(f, slice_case(f, inputs, s, params, 0, head_end));
  const std::vector<Tensor> outputs = whole_outputs(f, *cuts, inputs, head_expected, n);
  std::vector<const Tensor*> like;
  for (const Tensor& t : outputs) like.push_back(&t);
  if (!finish_run(run_on(k, f, inputs, like, params))) return r;
  r.checks.push_back({"head: elements " + range_text(0, head_end),
                      compare_cases(head_expected, slice_case(f, r.made, s, params, 0, head_end), policy)});
  r.checked = head_end;
  if (tail_begin < n) {
    const Case tail_expected = run_reference(f, slice_case(f, inputs, s, params, tail_begin, n));
    r.checks.push_back({"tail: elements " + range_text(tail_begin, n),
                        compare_cases(tail_expected, slice_case(f, r.made, s, params, tail_begin, n), policy)});
    r.checked += n - tail_begin;
  }
  return r;
}

std::string checked_line(const std::string& stem, const std::string& kernel, const KernelCase& kc) {
  return fmt::format("checked  {}: kernel {}: {} bit-identical to the reference{}", printable(stem), printable(kernel),
                     kc.sample_text(), kc.kernel_ms ? fmt::format(", kernel {:.3f} ms", *kc.kernel_ms) : "");
}

std::string refusal_lines(const std::string& stem, const std::string& kernel, const KernelCase& kc) {
  const std::string head = "REFUSED  " + printable(stem) + ": kernel " + printable(kernel);
  if (!kc.failure.empty()) return head + " " + printable(kc.failure) + "\n";
  std::string out;
  for (const SampleCheck& c : kc.checks) {
    if (c.report.conformant) continue;
    for (const TensorComparison& t : c.report.tensors) {
      if (t.mismatches == 0 && t.fault.empty()) continue;
      std::string classes;
      for (MismatchClass m : kMismatchClasses)
        if (const auto count = t.by_class[static_cast<std::size_t>(m)])
          classes += fmt::format("{}{} {}", classes.empty() ? "" : ", ", count, mismatch_class_name(m));
      out += head + fmt::format(", {}: '{}' ", c.label, printable(t.name)) +
             (t.fault.empty() ? fmt::format("{} of {} elements differ from the reference ({})", t.mismatches, t.elements, classes)
                              : printable(t.fault)) +
             "\n";
    }
  }
  return out;
}

bool kernel_round_trips(const FormatSpec& f) {
  return !f.fresh_state && std::find(f.inputs.begin(), f.inputs.end(), "input") != f.inputs.end() &&
         std::find(f.outputs.begin(), f.outputs.end(), "dequant") != f.outputs.end();
}

KernelCase kernel_round_trip(const KernelUnderReview& k, const FormatSpec& f, std::span<const float> x, std::size_t block_size,
                             std::uint64_t check_elements, std::vector<float>& xhat) {
  if (!kernel_round_trips(f)) throw std::invalid_argument("format " + f.name + " has no kernel round trip");
  nlohmann::json params = f.default_params;
  params["block_size"] = block_size;
  // torchao quantizes whole blocks only: its reference refuses a partial one, and the tensor is padded
  // as its reference round trip pads it; the other formats get their partial last block
  bool partial = true;
  try {
    Case probe;
    probe.add(Tensor::from_f32("input", {static_cast<std::int64_t>(block_size + 1)}, std::vector<float>(block_size + 1, 0.0f)));
    if (f.auxiliary_inputs)
      for (Tensor& t : f.auxiliary_inputs(params)) probe.add(std::move(t));
    probe.metadata = {{"format", f.name}, {"params", params.dump()}};
    run_reference(f, probe);
  } catch (const std::exception&) {
    partial = false;
  }
  std::vector<float> padded(partial ? x.size() : ceil_div(x.size(), block_size) * block_size, 0.0f);
  std::copy(x.begin(), x.end(), padded.begin());
  Case in;
  in.add(Tensor::from_f32("input", {static_cast<std::int64_t>(padded.size())}, padded));
  padded = {};
  if (f.auxiliary_inputs)
    for (Tensor& t : f.auxiliary_inputs(params)) in.add(std::move(t));
  in.metadata = {{"format", f.name}, {"params", params.dump()}};
  in.origin = "the audit's input at block size " + std::to_string(block_size);
  KernelCase r = run_checked_kernel(k, f, in, check_elements);
  if (r.trusted()) {
    const Tensor& dequant = r.made.require("dequant");
    xhat.resize(x.size());
    std::memcpy(xhat.data(), dequant.bytes.data(), x.size() * sizeof(float));
  }
  return r;
}

}  // namespace lowbit
