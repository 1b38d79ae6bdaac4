#pragma once
// Shared by the checks of CUDA's host-side FP8 conversions (test_cuda_fp8_host*.cpp): the four modes
// CUDA offers, each with the reference policy that docs/formats/fp8.md says it implements, and an
// exhaustive sweep of one CUDA conversion against the reference encoder (fp8_sweep.hpp) whose
// figures are printed and whose first mismatches are shown with their bits.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <thread>

#include "bits_printer.hpp"
#include "cuda_fp8_host.hpp"
#include "lowbit/fp8_sweep.hpp"

namespace lowbit::test {

using CudaMode = cuda_host::Mode;
inline constexpr const auto& kCudaModes = cuda_host::kModes;

inline std::string describe_input(std::uint32_t pattern, fp8::Source source) {
  switch (source) {
    case fp8::Source::F32: return describe_float(float_from_bits(pattern));
    case fp8::Source::BF16: return describe(bf16(pattern));
    case fp8::Source::F16: return describe(f16(pattern));
  }
  return "?";
}

// One line of figures and the first mismatches, e.g. "CUDA 13.0.88 __nv_cvt_float_to_fp8 e4m3fn
// __NV_NOSAT from f32: 4294967296 inputs, 0 mismatches (...), 21.0 s".
inline std::string describe_sweep(std::string_view function, const CudaMode& m, const fp8::SweepConfig& cfg,
                                  const fp8::SweepResult& r) {
  std::string s = fmt::format("CUDA {} {} {} {} from {}: {} inputs, {} mismatches (", cuda_host::toolkit_version(),
                              function, fp8::format_info(m.format).name, cuda_host::saturation_name(m.saturation),
                              fp8::source_name(cfg.source), r.inputs, r.mismatches);
  for (std::size_t k = 0; k < fp8::kInputClasses.size(); ++k)
    s += fmt::format("{}{} {}/{}", k ? ", " : "", fp8::input_class_name(fp8::kInputClasses[k]), r.by_class[k].mismatches,
                     r.by_class[k].inputs);
  s += fmt::format("; ties {}/{}), {:.1f} s", r.ties.mismatches, r.ties.inputs, r.seconds);
  for (const fp8::Mismatch& mm : r.first_mismatches)
    s += fmt::format("\n  input {}: reference {}, CUDA {}", describe_input(mm.input_bits, cfg.source),
                     describe(fp8_code(mm.expected, m.format)), describe(fp8_code(mm.actual, m.format)));
  return s;
}

// Every input of the source type through one CUDA conversion (a candidate or candidate_bits of
// fp8_sweep.hpp, set by the caller) against the reference under the mode's policy.
inline fp8::SweepResult sweep_cuda(std::string_view function, const CudaMode& m, fp8::SweepConfig cfg) {
  cfg.format = m.format;
  cfg.policy = m.policy;
  cfg.expected = fp8::Expected::Reference;
  cfg.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const fp8::SweepResult r = run_sweep(cfg);
  MESSAGE(describe_sweep(function, m, cfg, r));
  return r;
}

}  // namespace lowbit::test
