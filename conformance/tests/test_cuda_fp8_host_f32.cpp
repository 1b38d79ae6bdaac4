// CUDA's own __nv_cvt_float_to_fp8 (the installed toolkit's cuda_fp8.hpp, host path, through
// device/adapters/cuda_fp8_host.hpp) on all 2^32 binary32 inputs, for each of its four modes,
// against the reference under the policy docs/formats/fp8.md assigns to the mode: no difference
// allowed. Labelled slow (four exhaustive sweeps).
#include <doctest/doctest.h>

#include "cuda_host_sweep.hpp"

using namespace lowbit;
using namespace lowbit::fp8;
using namespace lowbit::test;

TEST_CASE("__nv_cvt_float_to_fp8 on all 2^32 float32 inputs equals the reference, every mode") {
  for (const CudaMode& m : kCudaModes) {
    SweepConfig cfg;
    cfg.source = Source::F32;
    cfg.candidate = [&m](float x, std::uint32_t) { return cuda_host::float_to_fp8(x, m.saturation, m.format); };
    const SweepResult r = sweep_cuda("__nv_cvt_float_to_fp8", m, cfg);
    CHECK(r.inputs == (std::uint64_t{1} << 32));
    CHECK(r.mismatches == 0);
    // 2^24 - 2 NaN patterns per sign, two infinities, two zeros: every class was reached.
    CHECK(r.by_class[static_cast<std::size_t>(InputClass::NaN)].inputs == 2 * ((1u << 23) - 1));
    CHECK(r.by_class[static_cast<std::size_t>(InputClass::Inf)].inputs == 2);
    CHECK(r.by_class[static_cast<std::size_t>(InputClass::Zero)].inputs == 2);
    CHECK(r.ties.inputs > 0);
  }
}
