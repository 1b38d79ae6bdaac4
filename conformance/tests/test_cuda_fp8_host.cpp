// CUDA's own host-side FP8 conversions (the installed toolkit's cuda_fp8.hpp, through
// device/adapters/cuda_fp8_host.hpp) against the reference, on every bf16 and f16 input, every FP8
// code, and doubles: for each of CUDA's four modes (E4M3 / E5M2, __NV_NOSAT / __NV_SATFINITE) the
// reference policy docs/formats/fp8.md assigns to it must give the same code on every input. The
// only differences allowed are the two the page documents: the double path's NaN codes, and the
// NaN pattern of __nv_cvt_fp8_to_halfraw. The float32 inputs: test_cuda_fp8_host_f32.cpp (slow).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "cuda_host_sweep.hpp"
#include "lowbit/fp8_checker.hpp"

using namespace lowbit;
using namespace lowbit::fp8;
using namespace lowbit::test;
using cuda_host::Saturation;

namespace {

std::size_t class_index(InputClass c) { return static_cast<std::size_t>(c); }

void check_clean(const SweepResult& r, std::uint64_t inputs) {
  CHECK(r.inputs == inputs);
  CHECK(r.mismatches == 0);
  CHECK(r.by_class[class_index(InputClass::Overflow)].inputs > 0);  // the sweep reached every class
  CHECK(r.by_class[class_index(InputClass::Subnormal)].inputs > 0);
  CHECK(r.ties.inputs > 0);
}

// The code __nv_cvt_double_to_fp8 gives a NaN, read off cuda_fp8.hpp (CUDA 12.x and 13.0): E4M3
// 0x7F, E5M2 0x7E | the double's second mantissa bit (bit 50; its `0x7EU | mantissa`), both with
// the NaN's sign. The float, bf16 and f16 paths never see it: they canonicalize a NaN to
// 0x7FFFFFFF first, which gives 0x7F. docs/formats/fp8.md#cuda-host-conversions.
std::uint8_t cuda_double_nan_code(double x, FormatId f) {
  const auto u = std::bit_cast<std::uint64_t>(x);
  const auto sign = static_cast<std::uint8_t>((u >> 56) & 0x80u);
  if (f == FormatId::E4M3FN) return sign | 0x7F;
  return static_cast<std::uint8_t>(sign | 0x7E | ((u >> 50) & 1u));
}

// The expected code of a finite double by the independent checker (the reference encoder takes
// binary32 only; the checker's nearest search is exact on any double).
std::uint8_t checker_code(const DoubleChecker& c, double x) {
  const double v = std::fabs(x);
  return c.code_for(std::signbit(x), c.rounded_nearest_even(v, c.interval_of(v)));
}

std::uint8_t encode_nearest_even(const CudaMode& m, float x) {
  return dispatch(m.format, [&](auto traits) { return fp8::encode_nearest_even<decltype(traits)>(x, m.policy); });
}

const double kInfD = std::numeric_limits<double>::infinity();

// Counts of a double check, with its first mismatches in bits.
struct DoubleTally {
  std::uint64_t inputs = 0;
  std::uint64_t mismatches = 0;
  std::string first;
  void add(double x, std::uint8_t expected, std::uint8_t actual, FormatId f) {
    ++inputs;
    if (expected == actual) return;
    if (++mismatches <= 8)
      first += fmt::format("\n  input {}: expected {}, CUDA {}", describe_float(x), describe(fp8_code(expected, f)),
                           describe(fp8_code(actual, f)));
  }
  std::string summary(const std::string& what) const {
    return fmt::format("{}: {} inputs, {} mismatches{}", what, inputs, mismatches, first);
  }
};

}  // namespace

TEST_CASE("__nv_cvt_bfloat16raw_to_fp8 on every bf16 input equals the reference, every mode") {
  for (const CudaMode& m : kCudaModes) {
    SweepConfig cfg;
    cfg.source = Source::BF16;
    cfg.candidate_bits = [&m](std::uint32_t h, std::uint32_t) {
      return cuda_host::bf16_to_fp8(static_cast<std::uint16_t>(h), m.saturation, m.format);
    };
    check_clean(sweep_cuda("__nv_cvt_bfloat16raw_to_fp8", m, cfg), 65536);
  }
}

TEST_CASE("__nv_cvt_halfraw_to_fp8 on every f16 input equals the reference, every mode") {
  for (const CudaMode& m : kCudaModes) {
    SweepConfig cfg;
    cfg.source = Source::F16;
    cfg.candidate_bits = [&m](std::uint32_t h, std::uint32_t) {
      return cuda_host::f16_to_fp8(static_cast<std::uint16_t>(h), m.saturation, m.format);
    };
    check_clean(sweep_cuda("__nv_cvt_halfraw_to_fp8", m, cfg), 65536);
  }
}

TEST_CASE("the __nv_fp8_e4m3 / __nv_fp8_e5m2 constructors from float and double are __NV_SATFINITE") {
  for (const CudaMode& m : kCudaModes) {
    if (m.saturation != Saturation::SatFinite) continue;
    for (Source s : {Source::BF16, Source::F16}) {
      SweepConfig cfg;
      cfg.source = s;
      cfg.candidate = [&m](float x, std::uint32_t) { return cuda_host::fp8_from_float_constructor(x, m.format); };
      check_clean(sweep_cuda("__nv_fp8_e4m3/e5m2(float)", m, cfg), 65536);
      cfg.candidate = [&m](float x, std::uint32_t) {
        return std::isnan(x) ? cuda_host::fp8_from_float_constructor(x, m.format)  // NaN: see the double path
                             : cuda_host::fp8_from_double_constructor(x, m.format);
      };
      check_clean(sweep_cuda("__nv_fp8_e4m3/e5m2(double), non-NaN", m, cfg), 65536);
    }
  }
}

TEST_CASE("__nv_cvt_double_to_fp8: NaNs, every bf16 and f16 value, boundaries and random doubles") {
  for (const CudaMode& m : kCudaModes) {
    const DoubleChecker checker(m.format, m.policy);
    DoubleTally nan, values, boundaries, random;
    auto cuda = [&m](double x) { return cuda_host::double_to_fp8(x, m.saturation, m.format); };

    // NaN: the double path's own codes (sign kept; E5M2's payload bit), on every float NaN widened
    // (the hardware's widening quiets it and keeps sign and payload) and on random NaN payloads.
    for (std::uint32_t p = 0x7F800001u; p <= 0x7FFFFFFFu; ++p)
      for (std::uint32_t sign : {0u, 0x80000000u}) {
        const double d = float_from_bits(p | sign);
        nan.add(d, cuda_double_nan_code(d, m.format), cuda(d), m.format);
      }
    std::mt19937_64 rng(20260512);
    for (int k = 0; k < (1 << 16); ++k) {
      const std::uint64_t payload = (rng() & 0x000FFFFFFFFFFFFFull) | 1u;  // nonzero: a NaN
      const double d = std::bit_cast<double>((rng() & 0x8000000000000000ull) | 0x7FF0000000000000ull | payload);
      nan.add(d, cuda_double_nan_code(d, m.format), cuda(d), m.format);
    }

    // Every non-NaN bf16 and f16 value as a double (±Inf included): the reference, as from float.
    for (std::uint32_t h = 0; h < 65536; ++h)
      for (float x : {widen_bf16(static_cast<std::uint16_t>(h)), widen_f16(static_cast<std::uint16_t>(h))})
        if (!std::isnan(x)) values.add(x, encode_nearest_even(m, x), cuda(x), m.format);

    // Doubles within 8 double ulps of every FP8 value and every midpoint (the overflow thresholds
    // among them), both signs, and of half the smallest subnormal: the checker's exact rounding.
    const std::vector<double>& v = checker.values();
    std::vector<double> centres;
    for (std::size_t i = 0; i + 2 < v.size(); ++i) {
      centres.push_back(v[i]);
      centres.push_back((v[i] + v[i + 1]) / 2);
    }
    centres.push_back(v[v.size() - 2]);
    for (double c : centres) {
      double x = c;
      for (int k = 0; k < 8 && x > 0; ++k) x = std::nextafter(x, 0.0);
      for (int k = 0; k < 17; ++k, x = std::nextafter(x, kInfD))
        for (double y : {x, -x}) boundaries.add(y, checker_code(checker, y), cuda(y), m.format);
    }

    // Random finite doubles: any bit pattern, and log-uniform over the FP8 range and around it.
    for (int k = 0; k < (1 << 20); ++k) {
      double d = std::bit_cast<double>(rng());
      if (!std::isfinite(d)) continue;
      random.add(d, checker_code(checker, d), cuda(d), m.format);
      const std::uint64_t mantissa = rng() & 0x000FFFFFFFFFFFFFull;
      const std::uint64_t exponent = 1023 - 30 + rng() % 50;  // 2^-30 .. 2^19
      d = std::bit_cast<double>((rng() & 0x8000000000000000ull) | exponent << 52 | mantissa);
      random.add(d, checker_code(checker, d), cuda(d), m.format);
    }

    const std::string mode = fmt::format("CUDA {} __nv_cvt_double_to_fp8 {} {}", cuda_host::toolkit_version(),
                                         format_info(m.format).name, cuda_host::saturation_name(m.saturation));
    MESSAGE(nan.summary(mode + ": NaN (double-path NaN codes)"));
    MESSAGE(values.summary(mode + ": bf16 and f16 values (reference)"));
    MESSAGE(boundaries.summary(mode + ": within 8 ulps of every value and midpoint (checker)"));
    MESSAGE(random.summary(mode + ": random finite doubles (checker)"));
    CHECK(nan.mismatches == 0);
    CHECK(values.mismatches == 0);
    CHECK(boundaries.mismatches == 0);
    CHECK(random.mismatches == 0);
    CHECK(boundaries.inputs > 4000);
  }
}

TEST_CASE("__nv_cvt_fp8_to_halfraw: every code decodes to the reference value; NaN is 0x7FFF") {
  for (FormatId f : kFormats) {
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<std::uint8_t>(c);
      const std::uint16_t h = cuda_host::fp8_to_f16(code, f);
      const float want = decode(f, code);
      CAPTURE(fp8_code(code, f));
      CAPTURE(f16(h));
      // Every FP8 value is a binary16 value, so the decode is exact; a NaN comes back as the
      // canonical 0x7FFF whatever the code's sign (docs/formats/fp8.md#cuda-host-conversions).
      if (std::isnan(want)) CHECK(f16(h) == f16(0x7FFF));
      else CHECK(bits(widen_f16(h)) == bits(want));
    }
  }
}
