// lowbit sweep fp8: every input of a source type through the reference FP8 encoder and the
// independent checker, for each requested (format, overflow policy) pair.
#include <limits>
#include <fmt/core.h>

#include <thread>

#include "command.hpp"
#include "number_option.hpp"
#include "lowbit/simd_level.hpp"
#include "progress.hpp"
#include "report_output.hpp"
#include "subcommand.hpp"
#include "threads_option.hpp"
#include "sweep_report.hpp"

namespace lowbit::cli {

namespace {

struct SweepOptions {
  std::vector<std::string> formats;
  std::vector<std::string> policies;
  std::string source = "f32";
  std::string rounding = "nearest";
  std::string nan_encoding;  // empty: the policy's usual implementation
  std::uint64_t seed = 1;
  int threads = default_threads();
  ReportOutput output;
  bool quiet = false;
  bool check_fast = false;
  std::string simd;  // empty: the CPU's best (simd_level.hpp)
};

int run_sweep_fp8(const SweepOptions& o) {
  ReportOutput output = o.output;
  output.prepare();  // fail before the work, not after
  if (!o.simd.empty()) {
    const simd::Level level = o.simd == "sse2" ? simd::Level::Sse2 : simd::Level::Avx2;
    if (!simd::available(level)) throw UsageError(fmt::format("--simd {}: this CPU lacks it", o.simd));
    simd::set_level(level);
  }

  std::vector<SweepRun> runs;
  for (const std::string& format_name : o.formats) {
    for (const std::string& policy_name : o.policies) {
      SweepRun run;
      fp8::SweepConfig& c = run.config;
      c.format = *fp8::parse_format(format_name);
      c.policy.overflow = *fp8::parse_overflow(policy_name);
      run.nan_encoding_name =
          o.nan_encoding.empty() ? std::string(fp8::default_nan_encoding(c.policy.overflow)) : o.nan_encoding;
      c.policy.nan = *fp8::parse_nan_encoding(run.nan_encoding_name, c.format);
      c.source = *fp8::parse_source(o.source);
      c.rounding = *fp8::parse_rounding(o.rounding);
      c.seed = o.seed;
      c.threads = o.threads;
      c.check_fast_path = o.check_fast;
      Progress progress(fmt::format("sweep {}/{} from {} ({})", format_name, policy_name, o.source, o.rounding),
                        o.quiet);
      c.progress = [&progress](std::uint64_t done, std::uint64_t total) { progress.update(done, total); };
      run.result = fp8::run_sweep(c);
      progress.finish();
      c.progress = nullptr;
      fmt::print("{} {} from {} ({}): {} inputs, {} mismatches, {:.2f} s with {} thread(s)\n", format_name,
                 policy_name, o.source, o.rounding, run.result.inputs, run.result.mismatches, run.result.seconds,
                 o.threads);
      if (run.result.fast_path.inputs)
        fmt::print("  fast cast (vectorized, {}) against the reference: {} inputs, {} mismatches\n",
                   simd::level_name(simd::active()), run.result.fast_path.inputs, run.result.fast_path.mismatches);
      for (const fp8::Mismatch& m : run.result.first_mismatches)
        fmt::print("  mismatch: input 0x{:08x} expected 0x{:02x} actual 0x{:02x}\n", m.input_bits, m.expected,
                   m.actual);
      runs.push_back(std::move(run));
    }
  }
  output.write(sweep_report_json(runs).dump(2) + "\n", sweep_report_markdown(runs));
  for (const SweepRun& r : runs)
    if (r.result.mismatches != 0 || r.result.fast_path.mismatches != 0) return kNotConformant;
  return kConformant;
}

}  // namespace

Subcommand add_sweep_command(CLI::App& parent) {
  CLI::App* sweep = parent.add_subcommand("sweep", "Exhaustive checks of a conversion over every input of a type");
  sweep->require_subcommand(1);
  const Subcommand fp8 = add_sweep_fp8_command(*sweep);
  const Subcommand codebook = add_sweep_codebook_command(*sweep);
  return {sweep, [fp8, codebook] { return fp8.app->parsed() ? fp8.run() : codebook.run(); }};
}

Subcommand add_sweep_fp8_command(CLI::App& sweep) {
  CLI::App* fp8_cmd = sweep.add_subcommand(
      "fp8",
      "Encode every input of the source type (all 2^32 float32, or all 2^16 bf16/f16) with the reference FP8\n"
      "encoder and with an independent exact checker; report every mismatch. Exit 0 only with none.");
  auto o = std::make_shared<SweepOptions>();
  fp8_cmd->add_option("--format", o->formats, "FP8 format(s): e4m3fn, e5m2")
      ->required()
      ->check(CLI::IsMember({"e4m3fn", "e5m2"}));
  fp8_cmd->add_option("--policy", o->policies,
                      "Overflow policy(ies): satfinite (CUDA/Triton/torch>=2.13, clamp to max finite), nan (torch<=2.12\n"
                      "e4m3fn), "
                      "inf (OCP non-saturating: Inf where the format has one, else NaN)")
      ->required()
      ->check(CLI::IsMember({"satfinite", "nan", "inf"}));
  fp8_cmd->add_option("--from", o->source, "Source type: f32, bf16, f16")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  fp8_cmd->add_option("--rounding", o->rounding, "nearest (ties to even) or stochastic (see docs/formats/fp8.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"nearest", "stochastic"}));
  add_whole_option(*fp8_cmd, "--seed", o->seed, std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max(),
                   "Seed of the per-input random bits for stochastic rounding");
  fp8_cmd->add_option("--nan-encoding", o->nan_encoding,
                      "Code of a NaN input: torch (0x7F|sign), cuda (0x7F, sign dropped), ml_dtypes (quiet NaN|sign);\n"
                      "a NaN made by overflow keeps the sign under each;\n"
                      "default: cuda with satfinite, torch otherwise")
      ->check(CLI::IsMember({"torch", "cuda", "ml_dtypes"}));
  add_threads_option(*fp8_cmd, o->threads);
  o->output.add_options(*fp8_cmd);
  fp8_cmd->add_flag("--quiet,-q", o->quiet, "No progress on stderr");
  fp8_cmd->add_flag("--check-fast", o->check_fast,
                    "Also hold the vectorized cast (the fast path) against the reference on every input "
                    "(nearest-even; about a quarter more CPU time)");
  fp8_cmd->add_option("--simd", o->simd,
                      "Instruction set of the fast cast that --check-fast holds: sse2 or avx2 (default: the CPU's best)")
      ->check(CLI::IsMember({"sse2", "avx2"}));
  return {fp8_cmd, [o] { return run_sweep_fp8(*o); }};
}

}  // namespace lowbit::cli
