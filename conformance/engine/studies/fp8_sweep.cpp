#include "lowbit/fp8_sweep.hpp"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "lowbit/fp8_cast.hpp"

namespace lowbit::fp8 {

std::string_view source_name(Source s) {
  switch (s) {
    case Source::F32: return "f32";
    case Source::BF16: return "bf16";
    case Source::F16: return "f16";
  }
  return "?";
}

std::optional<Source> parse_source(std::string_view name) {
  for (Source s : {Source::F32, Source::BF16, Source::F16})
    if (source_name(s) == name) return s;
  return std::nullopt;
}

std::string_view rounding_name(Rounding r) { return r == Rounding::NearestEven ? "nearest" : "stochastic"; }

std::optional<Rounding> parse_rounding(std::string_view name) {
  if (name == "nearest") return Rounding::NearestEven;
  if (name == "stochastic") return Rounding::Stochastic;
  return std::nullopt;
}

std::string_view input_class_name(InputClass c) {
  switch (c) {
    case InputClass::Zero: return "zero";
    case InputClass::Subnormal: return "subnormal";
    case InputClass::Normal: return "normal";
    case InputClass::Overflow: return "overflow";
    case InputClass::NaN: return "nan";
    case InputClass::Inf: return "inf";
  }
  return "?";
}

std::uint32_t sweep_random_bits(std::uint64_t seed, std::uint32_t input) {
  // splitmix64 finalizer over (seed, input): a well-mixed 32-bit value per input pattern.
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + input + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::uint32_t>((z ^ (z >> 31)) >> 32);
}

namespace {

// One chunk of consecutive input patterns, all of one sign (so magnitudes only grow inside it).
struct ChunkResult {
  std::array<Tally, kInputClasses.size()> by_class{};
  Tally ties;
  Tally fast_path;
  std::vector<Mismatch> mismatches;  // at most max_reported_mismatches
};

// The fast cast is run on this many consecutive inputs at a time (it divides every chunk size).
constexpr std::size_t kFastBatch = 4096;

template <Source S>
float widen(std::uint32_t pattern) {
  if constexpr (S == Source::F32) return float_from_bits(pattern);
  else if constexpr (S == Source::BF16) return widen_bf16(static_cast<std::uint16_t>(pattern));
  else return widen_f16(static_cast<std::uint16_t>(pattern));
}

// Expected::Reference: the rounded magnitude index (past max_finite when it overflows) and whether
// the input lies exactly half-way between two codes, read off the reference's own truncation, so
// that the classes and ties are counted as the checker counts them without its search.
struct Rounded {
  std::size_t magnitude;
  bool tie;
};

template <class Format, Rounding R>
Rounded rounded_by_reference(float x, std::uint32_t random_bits) {
  const detail::Truncated t = detail::truncate_magnitude<Format>(bits_of(x) & 0x7FFFFFFFu);
  const bool up = R == Rounding::Stochastic ? detail::rounds_up_stochastic(t, random_bits)
                                            : detail::rounds_up_nearest_even(t);
  // The checker has no midpoint past the first overflowing magnitude (nothing rounds there).
  const bool tie = t.code <= Format::max_finite && t.shift < 64 && t.rem == std::uint64_t{1} << (t.shift - 1);
  return {t.code + (up ? 1u : 0u), tie};
}

// AgainstReference: Expected::Reference, a template parameter so that the checker's sweeps keep
// their loop as it was.
// CheckFast: SweepConfig::check_fast_path (a template parameter too, so that a sweep without the
// check runs the loop it ran before the check existed: measured, a run-time flag cost 20 % there).
template <class Format, Source S, Rounding R, bool AgainstReference, bool CheckFast>
void sweep_chunk(const DoubleChecker& checker, const SweepConfig& cfg, std::uint64_t begin, std::uint64_t end,
                 ChunkResult& out) {
  // Locals, not members of cfg or out: the loop writes tallies, and the compiler must not reload
  // loop invariants through possibly aliasing references on every input.
  const Policy policy = cfg.policy;
  const bool has_candidate = static_cast<bool>(cfg.candidate);
  const bool has_candidate_bits = static_cast<bool>(cfg.candidate_bits);
  const std::uint64_t seed = cfg.seed;
  const double min_normal = checker.min_normal();
  std::array<Tally, kInputClasses.size()> by_class{};
  Tally ties;
  std::size_t interval = 0;
  bool interval_known = false;
  // The reference's own sweep also holds the fast cast against the reference encoder, batch by
  // batch, so that every input of the source type proves it in the same pass.
  constexpr bool check_fast = CheckFast && !AgainstReference && R == Rounding::NearestEven;
  [[maybe_unused]] std::array<float, kFastBatch> fast_in;
  [[maybe_unused]] std::array<std::uint8_t, kFastBatch> fast_codes;
  Tally fast;
  for (std::uint64_t n = begin; n < end; ++n) {
    const auto pattern = static_cast<std::uint32_t>(n);
    const float x = widen<S>(pattern);
    [[maybe_unused]] const std::size_t in_batch = static_cast<std::size_t>(n - begin) % kFastBatch;
    if constexpr (check_fast) {
      if (in_batch == 0) {
        for (std::size_t j = 0; j < kFastBatch; ++j) fast_in[j] = widen<S>(static_cast<std::uint32_t>(n + j));
        encode_array(Format::id, fast_in, fast_codes, policy);
      }
    }
    const std::uint32_t random_bits = R == Rounding::Stochastic ? sweep_random_bits(seed, pattern) : 0;
    auto reference = [&] {
      if constexpr (R == Rounding::Stochastic) return encode_stochastic<Format>(x, random_bits, policy);
      else return encode_nearest_even<Format>(x, policy);
    };
    std::uint8_t actual;
    if (has_candidate) actual = cfg.candidate(x, random_bits);
    else if (has_candidate_bits) actual = cfg.candidate_bits(pattern, random_bits);
    else actual = reference();
    if constexpr (check_fast) {
      ++fast.inputs;
      fast.mismatches += fast_codes[in_batch] != actual;
    }

    std::uint8_t expected;
    InputClass cls;
    bool tie = false;
    if (std::isnan(x)) {
      if constexpr (AgainstReference) expected = reference();
      else expected = checker.code_for_non_finite(x);
      cls = InputClass::NaN;
    } else if (std::isinf(x)) {
      if constexpr (AgainstReference) expected = reference();
      else expected = checker.code_for_non_finite(x);
      cls = InputClass::Inf;
    } else {
      const double v = std::fabs(static_cast<double>(x));
      std::size_t magnitude;
      if constexpr (AgainstReference) {
        const Rounded r = rounded_by_reference<Format, R>(x, random_bits);
        magnitude = r.magnitude;
        tie = r.tie;
        expected = reference();
      } else {
        interval = interval_known ? checker.advance(interval, v) : checker.interval_of(v);
        interval_known = true;
        magnitude = R == Rounding::Stochastic ? checker.rounded_stochastic(v, random_bits, interval)
                                              : checker.rounded_nearest_even(v, interval);
        expected = checker.code_for(std::signbit(x), magnitude);
        tie = checker.is_midpoint(v, interval);
      }
      if (magnitude > Format::max_finite) cls = InputClass::Overflow;
      else if (v == 0) cls = InputClass::Zero;
      else if (v < min_normal) cls = InputClass::Subnormal;
      else cls = InputClass::Normal;
    }
    const bool mismatch = expected != actual;
    Tally& t = by_class[static_cast<std::size_t>(cls)];
    ++t.inputs;
    t.mismatches += mismatch;
    ties.inputs += tie;
    ties.mismatches += tie && mismatch;
    if (mismatch && out.mismatches.size() < cfg.max_reported_mismatches)
      out.mismatches.push_back({pattern, random_bits, expected, actual});
  }
  out.by_class = by_class;
  out.ties = ties;
  out.fast_path = fast;
}

template <class Format, Source S, Rounding R>
SweepResult sweep_all(const SweepConfig& cfg) {
  const DoubleChecker checker(cfg.format, cfg.policy);
  const std::uint64_t total = S == Source::F32 ? (std::uint64_t{1} << 32) : (std::uint64_t{1} << 16);
  const std::uint64_t chunk = S == Source::F32 ? (std::uint64_t{1} << 22) : (std::uint64_t{1} << 12);
  const auto chunks = static_cast<std::int64_t>(total / chunk);  // chunk divides 2^31: no chunk mixes signs
  std::vector<ChunkResult> results(static_cast<std::size_t>(chunks));
  std::atomic<std::uint64_t> done{0};
  const bool check_fast = cfg.check_fast_path && !cfg.candidate && !cfg.candidate_bits;

#pragma omp parallel for schedule(dynamic, 1) num_threads(cfg.threads)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const auto begin = static_cast<std::uint64_t>(c) * chunk;
    ChunkResult& out = results[static_cast<std::size_t>(c)];
    if (cfg.expected == Expected::Reference) sweep_chunk<Format, S, R, true, false>(checker, cfg, begin, begin + chunk, out);
    else if (check_fast) sweep_chunk<Format, S, R, false, true>(checker, cfg, begin, begin + chunk, out);
    else sweep_chunk<Format, S, R, false, false>(checker, cfg, begin, begin + chunk, out);
    const std::uint64_t finished = done.fetch_add(chunk) + chunk;
    if (cfg.progress && omp_get_thread_num() == 0) cfg.progress(finished, total);
  }

  SweepResult r;
  r.inputs = total;
  for (const ChunkResult& c : results) {  // merged in input order: identical for any thread count
    for (std::size_t k = 0; k < c.by_class.size(); ++k) {
      r.by_class[k].inputs += c.by_class[k].inputs;
      r.by_class[k].mismatches += c.by_class[k].mismatches;
      r.mismatches += c.by_class[k].mismatches;
    }
    r.ties.inputs += c.ties.inputs;
    r.ties.mismatches += c.ties.mismatches;
    r.fast_path.inputs += c.fast_path.inputs;
    r.fast_path.mismatches += c.fast_path.mismatches;
    for (const Mismatch& m : c.mismatches)
      if (r.first_mismatches.size() < cfg.max_reported_mismatches) r.first_mismatches.push_back(m);
  }
  if (cfg.progress) cfg.progress(total, total);
  return r;
}

template <class Format>
SweepResult sweep_format(const SweepConfig& cfg) {
  const bool sr = cfg.rounding == Rounding::Stochastic;
  switch (cfg.source) {
    case Source::F32:
      return sr ? sweep_all<Format, Source::F32, Rounding::Stochastic>(cfg)
                : sweep_all<Format, Source::F32, Rounding::NearestEven>(cfg);
    case Source::BF16:
      return sr ? sweep_all<Format, Source::BF16, Rounding::Stochastic>(cfg)
                : sweep_all<Format, Source::BF16, Rounding::NearestEven>(cfg);
    case Source::F16:
      return sr ? sweep_all<Format, Source::F16, Rounding::Stochastic>(cfg)
                : sweep_all<Format, Source::F16, Rounding::NearestEven>(cfg);
  }
  throw std::invalid_argument("unknown source type");
}

}  // namespace

SweepResult run_sweep(const SweepConfig& cfg) {
  if (cfg.threads < 1) throw std::invalid_argument("thread count must be at least 1");
  if (cfg.candidate && cfg.candidate_bits)
    throw std::invalid_argument("a sweep takes one candidate conversion: candidate or candidate_bits, not both");
  // The reference held against itself proves nothing: without a candidate only the checker is a test.
  if (cfg.expected == Expected::Reference && !cfg.candidate && !cfg.candidate_bits)
    throw std::invalid_argument("Expected::Reference needs a candidate conversion");
  const auto start = std::chrono::steady_clock::now();
  SweepResult r = dispatch(cfg.format, [&cfg](auto traits) { return sweep_format<decltype(traits)>(cfg); });
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace lowbit::fp8
