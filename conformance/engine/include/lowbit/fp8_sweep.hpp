#pragma once
// Exhaustive FP8 conversion sweeps: every input of a source type (all 2^32 binary32 patterns, or all
// 2^16 of bf16 or f16) encoded by the reference (fp8.hpp) or a candidate conversion and compared with
// the independent DoubleChecker (or, for a candidate, with the reference), and every disagreement
// counted and kept in input order. Deterministic for any thread count.
#include <array>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "lowbit/fp8_checker.hpp"

namespace lowbit::fp8 {

enum class Source { F32, BF16, F16 };
enum class Rounding { NearestEven, Stochastic };
std::string_view source_name(Source s);
std::optional<Source> parse_source(std::string_view name);  // "f32" | "bf16" | "f16"
std::string_view rounding_name(Rounding r);
std::optional<Rounding> parse_rounding(std::string_view name);  // "nearest" | "stochastic"

// The random bits a stochastic sweep gives input pattern `input` (a counter-based hash, so any
// input's bits can be recomputed from the seed alone, whatever the thread count).
std::uint32_t sweep_random_bits(std::uint64_t seed, std::uint32_t input);

// Input classes, judged against the target format: how a reader of the report thinks of inputs.
enum class InputClass { Zero, Subnormal, Normal, Overflow, NaN, Inf };
inline constexpr std::array<InputClass, 6> kInputClasses{InputClass::Zero,     InputClass::Subnormal,
                                                         InputClass::Normal,   InputClass::Overflow,
                                                         InputClass::NaN,      InputClass::Inf};
std::string_view input_class_name(InputClass c);

// What the converted codes are compared with.
enum class Expected {
  Checker,    // the independent DoubleChecker under the policy: what proves the reference itself
  Reference,  // the reference encoder of fp8.hpp under the policy, for a candidate only: an official
              // implementation held against the reference, which its own sweeps prove against the
              // checker (test_fp8_sweep_f32). No checker search per input.
};

struct SweepConfig {
  FormatId format = FormatId::E4M3FN;
  Policy policy;
  Source source = Source::F32;
  Rounding rounding = Rounding::NearestEven;
  std::uint64_t seed = 0;  // stochastic rounding only
  int threads = 1;
  std::size_t max_reported_mismatches = 16;
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;  // called from one thread
  // The conversion under test; empty means the reference encoder of fp8.hpp. A kernel author's
  // conversion (or a deliberately wrong one, in the self-tests) plugs in here.
  std::function<std::uint8_t(float x, std::uint32_t random_bits)> candidate;
  // The same for a conversion that takes the source type's own bits (the binary32 pattern, or the
  // bf16 or f16 pattern in the low 16 bits) instead of the widened float: CUDA's
  // __nv_cvt_halfraw_to_fp8 and __nv_cvt_bfloat16raw_to_fp8. At most one of the two is set.
  std::function<std::uint8_t(std::uint32_t pattern, std::uint32_t random_bits)> candidate_bits;
  Expected expected = Expected::Checker;
  // Also hold the fast cast (fp8_cast.hpp encode_array) against the reference encoder on every input,
  // in the same pass (nearest-even sweeps of the reference itself): SweepResult::fast_path. Costs
  // about a quarter more CPU time on float32 (40 s -> 51 s of CPU for one format and policy);
  // test_fp8_sweep_f32 asks for it, `lowbit sweep fp8` with --check-fast.
  bool check_fast_path = false;
};

struct Tally {
  std::uint64_t inputs = 0;
  std::uint64_t mismatches = 0;
};

struct Mismatch {
  std::uint32_t input_bits;  // binary32, bf16 or f16 pattern, as the source type stores it
  std::uint32_t random_bits;
  std::uint8_t expected;
  std::uint8_t actual;
};

struct SweepResult {
  std::uint64_t inputs = 0;
  std::uint64_t mismatches = 0;
  std::array<Tally, kInputClasses.size()> by_class{};
  Tally ties;  // inputs exactly half-way between two neighbouring codes (also counted in a class)
  // The fast cast (fp8_cast.hpp encode_array, vectorized) against the reference encoder on the same
  // inputs, in the same pass, where SweepConfig::check_fast_path asks; inputs 0 otherwise. Disagreements here are not in `mismatches` (which is reference vs checker).
  Tally fast_path;
  std::vector<Mismatch> first_mismatches;  // in input order
  double seconds = 0;
};

SweepResult run_sweep(const SweepConfig& config);

}  // namespace lowbit::fp8
