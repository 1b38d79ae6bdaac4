// Exhaustive: all 2^32 binary32 inputs, for every (format, overflow policy) pair and both rounding
// modes, encoded by the reference and by the independent checker, and (nearest-even) the fast cast
// against the reference in the same pass. Labelled slow.
#include <doctest/doctest.h>

#include <thread>

#include "lowbit/fp8_sweep.hpp"

using namespace lowbit::fp8;

namespace {
void sweep_clean(FormatId format, Overflow overflow, Rounding rounding) {
  SweepConfig cfg;
  cfg.format = format;
  cfg.policy = {overflow, overflow == Overflow::SatFinite ? kCudaNan : kTorchNan};
  cfg.rounding = rounding;
  cfg.seed = 1;
  cfg.check_fast_path = true;
  cfg.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const SweepResult r = run_sweep(cfg);
  CAPTURE(format_info(format).name);
  CAPTURE(overflow_name(overflow));
  CAPTURE(rounding_name(rounding));
  CHECK(r.inputs == (std::uint64_t{1} << 32));
  CHECK(r.mismatches == 0);
  // 2^24 - 2 NaN patterns per sign, two infinities, two zeros.
  CHECK(r.by_class[static_cast<std::size_t>(InputClass::NaN)].inputs == 2 * ((1u << 23) - 1));
  CHECK(r.by_class[static_cast<std::size_t>(InputClass::Inf)].inputs == 2);
  CHECK(r.by_class[static_cast<std::size_t>(InputClass::Zero)].inputs == 2);
  if (rounding == Rounding::NearestEven) CHECK(r.ties.inputs > 0);
  // the fast cast (fp8_cast.hpp) against the reference, on the same inputs in the same pass
  CHECK(r.fast_path.inputs == (rounding == Rounding::NearestEven ? std::uint64_t{1} << 32 : 0));
  CHECK(r.fast_path.mismatches == 0);
}
}  // namespace

TEST_CASE("all 2^32 float32 inputs, nearest-even, every format and policy") {
  for (FormatId f : {FormatId::E4M3FN, FormatId::E5M2})
    for (Overflow o : {Overflow::SatFinite, Overflow::NaN, Overflow::Inf}) sweep_clean(f, o, Rounding::NearestEven);
}

TEST_CASE("all 2^32 float32 inputs, stochastic, every format") {
  for (FormatId f : {FormatId::E4M3FN, FormatId::E5M2}) sweep_clean(f, Overflow::SatFinite, Rounding::Stochastic);
}
