// lowbit inspect FILE: what a case file holds, with per-tensor sha256 and, for a quantized state, a
// summary and a signature of its dequantized values that does not depend on the storage layout.
#include <fmt/core.h>

#include <cmath>
#include <limits>

#include "command.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/fp8.hpp"
#include "lowbit/manifest.hpp"
#include "lowbit/printable.hpp"
#include "lowbit/sha256.hpp"
#include "subcommand.hpp"
#include "torch_checkpoint.hpp"

namespace lowbit::cli {

namespace {

struct Summary {
  std::uint64_t count = 0, zeros = 0, nans = 0, infs = 0;
  double min = std::numeric_limits<double>::infinity(), max = -std::numeric_limits<double>::infinity();
  double sum = 0, abs_sum = 0;
};

Summary summarize(const std::vector<float>& v) {
  Summary s;
  for (float x : v) {
    ++s.count;
    if (std::isnan(x)) {
      ++s.nans;
      continue;
    }
    if (std::isinf(x)) {
      ++s.infs;
      continue;
    }
    s.zeros += x == 0;
    s.min = std::min<double>(s.min, x);
    s.max = std::max<double>(s.max, x);
    s.sum += x;
    s.abs_sum += std::fabs(x);
  }
  return s;
}

std::string describe(const Summary& s) {
  const std::uint64_t finite = s.count - s.nans - s.infs;
  if (finite == 0) return fmt::format("{} values, none finite ({} NaN, {} Inf)", s.count, s.nans, s.infs);
  return fmt::format("min {:.9g}, max {:.9g}, mean {:.9g}, mean |x| {:.9g}, {} zeros, {} NaN, {} Inf", s.min, s.max,
                     s.sum / double(finite), s.abs_sum / double(finite), s.zeros, s.nans, s.infs);
}

std::vector<float> as_floats(const Tensor& t) {
  std::vector<float> out(t.element_count());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (const auto format = fp8::format_of_dtype(t.dtype)) out[i] = fp8::decode(*format, t.bytes[i]);
    else out[i] = t.value_as_float(i);
  }
  return out;
}

int run_inspect(const std::string& path) {
  refuse_torch_checkpoint(path, "lowbit inspect states.safetensors");
  const Case c = read_case_guarded(path);
  fmt::print("{}\n", printable(path));
  for (const auto& [k, v] : c.metadata) fmt::print("  {}: {}\n", printable(k), printable(v));
  fmt::print("tensors:\n");
  for (const Tensor& t : c.tensors()) {
    fmt::print("  {:<16} {:<8} {:<14} sha256 {}\n", printable(t.name), dtype_name(t.dtype), shape_text(t.shape), sha256_hex(t.bytes));
    const bool numeric = t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16 ||
                         fp8::format_of_dtype(t.dtype).has_value();
    if (numeric) fmt::print("  {:<16} {}\n", "", describe(summarize(as_floats(t))));
  }
  const FormatSpec* spec = find_format(c.format());
  if (!spec) return kConformant;
  const DequantizedState state = dequantized_state(*spec, c);  // checks the case against the format's schema first
  if (!state.unavailable.empty()) {
    if (spec->dequantize) fmt::print("dequantized state ({}): not shown, {}\n", spec->name, printable(state.unavailable));
    return kConformant;
  }
  const std::vector<float>& d = state.values;
  fmt::print("dequantized state ({}):\n  {}\n  signature (sha256 of the dequantized float32 values): {}\n", spec->name,
             describe(summarize(d)), dequantized_signature(d));
  return kConformant;
}

}  // namespace

Subcommand add_inspect_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "inspect", "Show a case file: metadata, tensors with dtype, shape and sha256, value summaries, and for a\n"
                 "quantized state the signature of its dequantized values");
  auto path = std::make_shared<std::string>();
  cmd->add_option("FILE", *path, "Case file (safetensors)")->required();
  return {cmd, [path] { return run_inspect(*path); }};
}

}  // namespace lowbit::cli
