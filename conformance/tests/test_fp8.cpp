// FP8 reference: decoding of every code, the documented encode behaviour of each implementation,
// ties and boundaries against the multiprecision oracle, and exhaustive bf16 / f16 sweeps against
// the independent checker. Expected codes come from the oracle or from the boundary tables of
// docs/formats/fp8.md#boundary-inputs (read off the c10, cuda_fp8.hpp and ml_dtypes sources).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string_view>

#include "bits_printer.hpp"
#include "lowbit/fp8.hpp"
#include "lowbit/fp8_sweep.hpp"
#include "lowbit/oracle.hpp"

using namespace lowbit;
using namespace lowbit::fp8;
using namespace lowbit::test;

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
float next_up(float x) { return std::nextafter(x, kInf); }
float next_down(float x) { return std::nextafter(x, -kInf); }

template <class Format>
void check_every_code_decodes_to_its_ocp_value() {
  const FormatInfo info = format_info(Format::id);
  int nans = 0, infs = 0;
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    const float got = decode<Format>(code);
    CAPTURE(fp8_code<Format>(code));
    CAPTURE(bits(got));
    CHECK(std::signbit(got) == bool(code & 0x80));  // the sign survives, -0 included
    if (oracle::fp8_is_nan(code, info)) {
      ++nans;
      CHECK(is_nan(got));
      CHECK(Format::is_nan(code));
    } else if (oracle::fp8_is_inf(code, info)) {
      ++infs;
      CHECK(is_inf(got));
      CHECK(Format::is_inf(code));
    } else {
      CHECK(oracle::exact_value(got) == oracle::exact_fp8_value(code, info));
      CHECK_FALSE(Format::is_nan(code));
    }
  }
  // OCP OFP8: E4M3FN has NaN only at S.1111.111 and no Inf; E5M2 has six NaNs and two Infs.
  CHECK(nans == (Format::has_inf ? 6 : 2));
  CHECK(infs == (Format::has_inf ? 2 : 0));
}

// Every float32 within one ulp of every rounding boundary (midpoints and the overflow threshold),
// with both signs: the reference must agree with the oracle under each policy and for stochastic
// rounding with random bits chosen at and beside the carry threshold.
template <class Format>
void check_boundaries_against_oracle(const Policy& policy) {
  const FormatInfo info = format_info(Format::id);
  int checked = 0;
  for (const oracle::Exact& mid : oracle::fp8_midpoints(info)) {
    const float near = oracle::round_to_f32(mid);
    for (float x : {next_down(next_down(near)), next_down(near), near, next_up(near), next_up(next_up(near))}) {
      for (float s : {x, -x}) {
        CAPTURE(bits(s));
        CHECK(fp8_code<Format>(encode_nearest_even<Format>(s, policy)) ==
              fp8_code<Format>(oracle::to_fp8_nearest_even(s, info, policy)));
        for (std::uint32_t r : {0u, 1u, 0x7FFFFFFFu, 0x80000000u, 0x80000001u, 0xFFFFFFFFu}) {
          CHECK(fp8_code<Format>(encode_stochastic<Format>(s, r, policy)) ==
                fp8_code<Format>(oracle::to_fp8_stochastic(s, r, info, policy)));
        }
        ++checked;
      }
    }
  }
  CHECK(checked == 10 * int(oracle::fp8_midpoints(info).size()));
}

template <class Format>
void check_sweep_clean(Source source, Rounding rounding, const Policy& policy) {
  SweepConfig cfg;
  cfg.format = Format::id;
  cfg.policy = policy;
  cfg.source = source;
  cfg.rounding = rounding;
  cfg.seed = 12345;
  const SweepResult r = run_sweep(cfg);
  CAPTURE(source_name(source));
  CAPTURE(overflow_name(policy.overflow));
  CHECK(r.inputs == 65536);
  CHECK(r.mismatches == 0);
  std::uint64_t sum = 0;
  for (const Tally& t : r.by_class) sum += t.inputs;
  CHECK(sum == 65536);
  CHECK(r.by_class[static_cast<std::size_t>(InputClass::Zero)].inputs == 2);
  CHECK(r.by_class[static_cast<std::size_t>(InputClass::Inf)].inputs == 2);
}

}  // namespace

TEST_CASE("every E4M3FN code decodes to the OCP OFP8 value") { check_every_code_decodes_to_its_ocp_value<E4M3FN>(); }
TEST_CASE("every E5M2 code decodes to the OCP OFP8 value") { check_every_code_decodes_to_its_ocp_value<E5M2>(); }

TEST_CASE("decoded landmarks: largest finite, smallest normal and subnormal") {
  CHECK(value(decode<E4M3FN>(0x7E)) == value(448.0f));
  CHECK(value(decode<E4M3FN>(0x08)) == value(std::ldexp(1.0f, -6)));
  CHECK(value(decode<E4M3FN>(0x01)) == value(std::ldexp(1.0f, -9)));
  CHECK(value(decode<E5M2>(0x7B)) == value(57344.0f));
  CHECK(value(decode<E5M2>(0x04)) == value(std::ldexp(1.0f, -14)));
  CHECK(value(decode<E5M2>(0x01)) == value(std::ldexp(1.0f, -16)));
  CHECK(is_inf(decode<E5M2>(0xFC)));
}

TEST_CASE("NaN codes widen by each implementation's rule (nan_widening; issue 11 item 4)") {
  // Expected bits worked by hand from c10's fp8e4m3fn_to_fp32_value (E4M3FN: the magnitude's
  // mantissa moved up, exponent forced to all ones) and fp8e5m2_to_fp32_value (E5M2 << 8 is an f16;
  // fp16_ieee_to_fp32_value moves its mantissa up and its multiply by 2^-112 quiets a signalling
  // NaN), and from ml_dtypes' ConvertImpl (a NaN becomes the quiet NaN with its sign). The torch
  // and ml_dtypes golden cases pin the codes their casts produce (test_golden).
  auto bits = [](float f) { return bits_of(f); };
  CHECK(bits(decode<E4M3FN>(0x7F, NanWidening::Payload)) == 0x7FF00000u);
  CHECK(bits(decode<E4M3FN>(0xFF, NanWidening::Payload)) == 0xFFF00000u);
  CHECK(bits(decode<E5M2>(0x7D, NanWidening::Payload)) == 0x7FE00000u);
  CHECK(bits(decode<E5M2>(0x7E, NanWidening::Payload)) == 0x7FC00000u);
  CHECK(bits(decode<E5M2>(0x7F, NanWidening::Payload)) == 0x7FE00000u);
  CHECK(bits(decode<E5M2>(0xFD, NanWidening::Payload)) == 0xFFE00000u);
  for (std::uint8_t c : {std::uint8_t{0x7F}, std::uint8_t{0xFF}}) {
    CHECK(bits(decode<E4M3FN>(c, NanWidening::Quiet)) == (0x7FC00000u | (std::uint32_t{c & 0x80u} << 24)));
    CHECK(bits(decode<E5M2>(c, NanWidening::Quiet)) == (0x7FC00000u | (std::uint32_t{c & 0x80u} << 24)));
  }
  // every other code decodes the same under both rules
  for (unsigned c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    if (!E4M3FN::is_nan(code)) CHECK(bits(decode<E4M3FN>(code, NanWidening::Payload)) == bits(decode<E4M3FN>(code)));
    if (!E5M2::is_nan(code)) CHECK(bits(decode<E5M2>(code, NanWidening::Payload)) == bits(decode<E5M2>(code)));
  }
  CHECK(parse_nan_widening("c10") == NanWidening::Payload);
  CHECK(parse_nan_widening("quiet") == NanWidening::Quiet);
  CHECK_FALSE(parse_nan_widening("cuda").has_value());
}

TEST_CASE("E4M3FN encode at the boundaries: torch <= 2.12 (NaN on overflow), torch >= 2.13, CUDA SATFINITE and NOSAT") {
  // Expected codes: docs/formats/fp8.md#boundary-inputs (c10 and cuda_fp8.hpp at the versions that
  // page names); the torch >= 2.13 column read off torch/headeronly/util/Float8_e4m3fn.h in the
  // 2.13.0 and 2.15.0 wheels; CUDA's columns read off cuda_fp8.hpp (13.0) __nv_cvt_double_to_fp8,
  // which test_cuda_fp8_host*.cpp run on every input.
  const Policy legacy = torch_eager_legacy<E4M3FN>();
  const Policy torch = torch_eager<E4M3FN>();
  const Policy sat = cuda_satfinite();
  const Policy nosat = cuda_nosat<E4M3FN>();
  struct Row { float x; std::uint8_t legacy, torch, sat, nosat; };
  const Row rows[] = {
      {448.0f, 0x7E, 0x7E, 0x7E, 0x7E},
      {next_down(464.0f), 0x7E, 0x7E, 0x7E, 0x7E},
      {464.0f, 0x7E, 0x7E, 0x7E, 0x7E},  // tie between 448 (even) and 480: stays at 448
      {next_up(464.0f), 0x7F, 0x7E, 0x7E, 0x7F},
      {480.0f, 0x7F, 0x7E, 0x7E, 0x7F},
      {-480.0f, 0xFF, 0xFE, 0xFE, 0xFF},  // overflow to NaN keeps the sign, in CUDA's NOSAT too
      {kInf, 0x7F, 0x7E, 0x7E, 0x7F},
      {-kInf, 0xFF, 0xFE, 0xFE, 0xFF},
      {kNaN, 0x7F, 0x7F, 0x7F, 0x7F},
      {-kNaN, 0xFF, 0xFF, 0x7F, 0x7F},  // c10 keeps a NaN input's sign; CUDA canonicalizes it away
      {-0.0f, 0x80, 0x80, 0x80, 0x80},
      {std::ldexp(1.0f, -10), 0x00, 0x00, 0x00, 0x00},  // half the smallest subnormal: tie to even zero
      {next_up(std::ldexp(1.0f, -10)), 0x01, 0x01, 0x01, 0x01},
      {3 * std::ldexp(1.0f, -10), 0x02, 0x02, 0x02, 0x02},
      {5 * std::ldexp(1.0f, -10), 0x02, 0x02, 0x02, 0x02},
      {std::ldexp(1.0f, -6) - std::ldexp(1.0f, -10), 0x08, 0x08, 0x08, 0x08},  // rounds up into the first normal
      {1.0625f, 0x38, 0x38, 0x38, 0x38},
      {1.1875f, 0x3A, 0x3A, 0x3A, 0x3A},
      {next_up(448.0f), 0x7E, 0x7E, 0x7E, 0x7E},
  };
  const FormatInfo info = format_info(FormatId::E4M3FN);
  for (const Row& r : rows) {
    CAPTURE(bits(r.x));
    CHECK(e4m3(encode_nearest_even<E4M3FN>(r.x, legacy)) == e4m3(r.legacy));
    CHECK(e4m3(encode_nearest_even<E4M3FN>(r.x, torch)) == e4m3(r.torch));
    CHECK(e4m3(encode_nearest_even<E4M3FN>(r.x, sat)) == e4m3(r.sat));
    CHECK(e4m3(encode_nearest_even<E4M3FN>(r.x, nosat)) == e4m3(r.nosat));
    CHECK(e4m3(oracle::to_fp8_nearest_even(r.x, info, legacy)) == e4m3(r.legacy));
    CHECK(e4m3(oracle::to_fp8_nearest_even(r.x, info, torch)) == e4m3(r.torch));
    CHECK(e4m3(oracle::to_fp8_nearest_even(r.x, info, sat)) == e4m3(r.sat));
    CHECK(e4m3(oracle::to_fp8_nearest_even(r.x, info, nosat)) == e4m3(r.nosat));
  }
  // ml_dtypes agrees with torch <= 2.12 on E4M3FN; the non-saturating "inf" policy has no Inf to give.
  CHECK(ml_dtypes<E4M3FN>() == legacy);
  CHECK(e4m3(encode_nearest_even<E4M3FN>(1000.0f, {Overflow::Inf, kTorchNan})) == e4m3(0x7F));
  // torch >= 2.13 changed E4M3FN only: E5M2 still overflows to Inf.
  CHECK(torch_eager<E5M2>() == torch_eager_legacy<E5M2>());
}

TEST_CASE("E5M2 encode at the boundaries: torch, CUDA SATFINITE and NOSAT, ml_dtypes NaN") {
  const Policy torch = torch_eager_legacy<E5M2>();
  const Policy sat = cuda_satfinite();
  const Policy nosat = cuda_nosat<E5M2>();
  struct Row { float x; std::uint8_t torch, sat, nosat; };
  const Row rows[] = {
      {57344.0f, 0x7B, 0x7B, 0x7B},
      {next_down(61440.0f), 0x7B, 0x7B, 0x7B},
      {61440.0f, 0x7C, 0x7B, 0x7C},  // tie between 57344 (odd code) and 65536: goes to even, i.e. overflow
      {65536.0f, 0x7C, 0x7B, 0x7C},
      {-65536.0f, 0xFC, 0xFB, 0xFC},
      {kInf, 0x7C, 0x7B, 0x7C},
      {-kInf, 0xFC, 0xFB, 0xFC},
      {kNaN, 0x7F, 0x7F, 0x7F},
      {-kNaN, 0xFF, 0x7F, 0x7F},
      {std::ldexp(1.0f, -16), 0x01, 0x01, 0x01},
      {std::ldexp(1.0f, -17), 0x00, 0x00, 0x00},
      {next_up(std::ldexp(1.0f, -17)), 0x01, 0x01, 0x01},
  };
  const FormatInfo info = format_info(FormatId::E5M2);
  for (const Row& r : rows) {
    CAPTURE(bits(r.x));
    CHECK(e5m2(encode_nearest_even<E5M2>(r.x, torch)) == e5m2(r.torch));
    CHECK(e5m2(encode_nearest_even<E5M2>(r.x, sat)) == e5m2(r.sat));
    CHECK(e5m2(encode_nearest_even<E5M2>(r.x, nosat)) == e5m2(r.nosat));
    CHECK(e5m2(oracle::to_fp8_nearest_even(r.x, info, torch)) == e5m2(r.torch));
    CHECK(e5m2(oracle::to_fp8_nearest_even(r.x, info, sat)) == e5m2(r.sat));
    CHECK(e5m2(oracle::to_fp8_nearest_even(r.x, info, nosat)) == e5m2(r.nosat));
  }
  CHECK(e5m2(encode_nearest_even<E5M2>(kNaN, ml_dtypes<E5M2>())) == e5m2(0x7E));
  CHECK(e5m2(encode_nearest_even<E5M2>(-kNaN, ml_dtypes<E5M2>())) == e5m2(0xFE));
  // "nan" on a format with Inf: finite overflow becomes NaN, an Inf input stays Inf.
  CHECK(e5m2(encode_nearest_even<E5M2>(65536.0f, {Overflow::NaN, kTorchNan})) == e5m2(0x7F));
  CHECK(e5m2(encode_nearest_even<E5M2>(kInf, {Overflow::NaN, kTorchNan})) == e5m2(0x7C));
  // A NaN made by overflow keeps the input's sign whatever the NaN encoding does to NaN inputs.
  CHECK(e5m2(encode_nearest_even<E5M2>(-65536.0f, {Overflow::NaN, kCudaNan})) == e5m2(0xFF));
  CHECK(e5m2(encode_nearest_even<E5M2>(-kNaN, {Overflow::NaN, kCudaNan})) == e5m2(0x7F));
}

TEST_CASE("stochastic rounding: grid values never move, the carry decides") {
  const Policy p = torch_eager_legacy<E4M3FN>();
  // 1.0625 lies half-way between 1.0 (0x38) and 1.125 (0x39): fraction 1/2, top32 = 2^31.
  CHECK(e4m3(encode_stochastic<E4M3FN>(1.0625f, 0x7FFFFFFFu, p)) == e4m3(0x38));
  CHECK(e4m3(encode_stochastic<E4M3FN>(1.0625f, 0x80000000u, p)) == e4m3(0x39));
  for (std::uint32_t r : {0u, 0x12345678u, 0xFFFFFFFFu}) CHECK(e4m3(encode_stochastic<E4M3FN>(1.125f, r, p)) == e4m3(0x39));
  CHECK(e4m3(encode_stochastic<E4M3FN>(next_up(1.0f), 0u, p)) == e4m3(0x38));
  CHECK(e4m3(encode_stochastic<E4M3FN>(next_up(1.0f), 0xFFFFFFFFu, p)) == e4m3(0x39));
  // Above 448 even by one float ulp, a carry overflows: NaN under torch rules, 448 saturated.
  CHECK(e4m3(encode_stochastic<E4M3FN>(next_up(448.0f), 0xFFFFFFFFu, p)) == e4m3(0x7F));
  CHECK(e4m3(encode_stochastic<E4M3FN>(next_up(448.0f), 0xFFFFFFFFu, cuda_satfinite())) == e4m3(0x7E));
}

TEST_CASE("every float32 next to a rounding boundary matches the oracle") {
  for (const Policy& p : {torch_eager_legacy<E4M3FN>(), cuda_satfinite(), cuda_nosat<E4M3FN>()})
    check_boundaries_against_oracle<E4M3FN>(p);
  for (const Policy& p : {torch_eager_legacy<E5M2>(), cuda_satfinite(), ml_dtypes<E5M2>(), Policy{Overflow::NaN, kTorchNan}})
    check_boundaries_against_oracle<E5M2>(p);
}

TEST_CASE("f16 widening is exact on all 65536 patterns") {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float x = widen_f16(static_cast<std::uint16_t>(h));
    const unsigned e = (h >> 10) & 0x1F, m = h & 0x3FF;
    CAPTURE(f16(h));
    CAPTURE(bits(x));
    if (e == 0x1F) {
      CHECK((m == 0 ? is_inf(x) : is_nan(x)));
    } else {
      // binary16 value by its own field formula, independent of the bit shuffling in widen_f16
      const oracle::Exact v = e == 0 ? ldexp(oracle::Exact(m), -24) : ldexp(oracle::Exact(1024 + m), int(e) - 25);
      CHECK(oracle::exact_value(x) == ((h & 0x8000) ? oracle::Exact(-v) : v));
      CHECK(std::signbit(x) == bool(h & 0x8000));
    }
  }
}

TEST_CASE("exhaustive bf16 and f16 sweeps: zero mismatches for every format and policy") {
  for (Source s : {Source::BF16, Source::F16}) {
    for (Rounding r : {Rounding::NearestEven, Rounding::Stochastic}) {
      for (Overflow o : {Overflow::SatFinite, Overflow::NaN, Overflow::Inf}) {
        check_sweep_clean<E4M3FN>(s, r, {o, kTorchNan});
        check_sweep_clean<E5M2>(s, r, {o, kTorchNan});
      }
      check_sweep_clean<E5M2>(s, r, ml_dtypes<E5M2>());
      check_sweep_clean<E4M3FN>(s, r, cuda_satfinite());
      check_sweep_clean<E4M3FN>(s, r, cuda_nosat<E4M3FN>());
      check_sweep_clean<E5M2>(s, r, cuda_nosat<E5M2>());
    }
  }
}

TEST_CASE("a sweep finds and reports a wrong conversion") {
  // CUDA's saturating conversion checked against torch's rules must fail on exactly the
  // overflowing and infinite inputs and the negative NaNs, and nowhere else.
  SweepConfig cfg;
  cfg.format = FormatId::E4M3FN;
  cfg.policy = torch_eager_legacy<E4M3FN>();
  cfg.source = Source::BF16;
  cfg.candidate = [](float x, std::uint32_t) { return encode_nearest_even<E4M3FN>(x, cuda_satfinite()); };
  const SweepResult r = run_sweep(cfg);
  const auto& overflow = r.by_class[static_cast<std::size_t>(InputClass::Overflow)];
  const auto& inf = r.by_class[static_cast<std::size_t>(InputClass::Inf)];
  CHECK(overflow.inputs > 0);
  CHECK(overflow.mismatches == overflow.inputs);
  const auto& nan = r.by_class[static_cast<std::size_t>(InputClass::NaN)];
  CHECK(inf.mismatches == 2);
  CHECK(nan.mismatches == nan.inputs / 2);  // negative NaNs: torch keeps the sign, CUDA drops it
  CHECK(r.mismatches == overflow.inputs + inf.mismatches + nan.mismatches);
  REQUIRE(r.first_mismatches.size() == cfg.max_reported_mismatches);
  // bf16 0x43E8 = 464 ties down to 448; 0x43E9 = 466 is the first positive pattern that overflows.
  CHECK(bf16(r.first_mismatches[0].input_bits) == bf16(0x43E9));
  CHECK(e4m3(r.first_mismatches[0].expected) == e4m3(0x7F));
  CHECK(e4m3(r.first_mismatches[0].actual) == e4m3(0x7E));
}

TEST_CASE("a sweep against the reference (Expected::Reference) counts as one against the checker") {
  // The same wrong conversion, given the bf16 bits (candidate_bits), held against the reference
  // encoder instead of the checker: the same mismatches, classes and ties, input by input, for
  // every source type and policy; the reference's classification is read off its own truncation.
  for (Source s : {Source::BF16, Source::F16}) {
    for (const Policy& p : {torch_eager_legacy<E4M3FN>(), cuda_satfinite(), cuda_nosat<E4M3FN>()}) {
      SweepConfig cfg;
      cfg.format = FormatId::E4M3FN;
      cfg.policy = p;
      cfg.source = s;
      cfg.max_reported_mismatches = 1000000;
      const bool from_bf16 = s == Source::BF16;
      cfg.candidate_bits = [from_bf16](std::uint32_t h, std::uint32_t) {
        const auto bits16 = static_cast<std::uint16_t>(h);
        return encode_nearest_even<E4M3FN>(from_bf16 ? widen_bf16(bits16) : widen_f16(bits16), torch_eager<E4M3FN>());
      };
      const SweepResult by_checker = run_sweep(cfg);
      cfg.expected = Expected::Reference;
      const SweepResult by_reference = run_sweep(cfg);
      CAPTURE(source_name(s));
      CAPTURE(overflow_name(p.overflow));
      CHECK(by_checker.mismatches > 0);
      CHECK(by_reference.mismatches == by_checker.mismatches);
      CHECK(by_reference.ties.inputs == by_checker.ties.inputs);
      CHECK(by_reference.ties.inputs > 0);
      for (std::size_t k = 0; k < kInputClasses.size(); ++k) {
        CHECK(by_reference.by_class[k].inputs == by_checker.by_class[k].inputs);
        CHECK(by_reference.by_class[k].mismatches == by_checker.by_class[k].mismatches);
      }
      REQUIRE(by_reference.first_mismatches.size() == by_checker.first_mismatches.size());
      for (std::size_t i = 0; i < by_checker.first_mismatches.size(); ++i) {
        CHECK(by_reference.first_mismatches[i].input_bits == by_checker.first_mismatches[i].input_bits);
        CHECK(by_reference.first_mismatches[i].expected == by_checker.first_mismatches[i].expected);
      }
    }
  }
}

TEST_CASE("a sweep refuses a reference-only comparison and two candidates") {
  SweepConfig cfg;
  cfg.source = Source::BF16;
  cfg.expected = Expected::Reference;  // the reference against itself would prove nothing
  CHECK_THROWS_AS(run_sweep(cfg), std::invalid_argument);
  cfg.candidate = [](float x, std::uint32_t) { return encode_nearest_even<E4M3FN>(x, cuda_satfinite()); };
  cfg.candidate_bits = [](std::uint32_t, std::uint32_t) { return std::uint8_t{0}; };
  CHECK_THROWS_AS(run_sweep(cfg), std::invalid_argument);
}

// ---- The traits and the dispatcher ---------------------------------------------------------

TEST_CASE("traits: the derived codes and values of E4M3FN and E5M2 are OCP OFP8's") {
  // OCP OFP8 rev 1.0 (docs/formats/fp8.md's table): largest finite S.1111.110 = 448 and
  // S.11110.11 = 57344; E5M2's Inf S.11111.00; ml_dtypes' quiet_NaN 0x7F and 0x7E.
  CHECK(e4m3(E4M3FN::max_finite) == e4m3(0x7E));
  CHECK(value(E4M3FN::max_value) == value(448.0f));
  CHECK(e4m3(E4M3FN::quiet_nan) == e4m3(0x7F));
  CHECK(code(E4M3FN::inf) == code(0));
  CHECK(E4M3FN::has_negative_zero);
  CHECK(E4M3FN::code_dtype == DType::F8_E4M3);
  CHECK(e5m2(E5M2::max_finite) == e5m2(0x7B));
  CHECK(value(E5M2::max_value) == value(57344.0f));
  CHECK(e5m2(E5M2::quiet_nan) == e5m2(0x7E));
  CHECK(e5m2(E5M2::inf) == e5m2(0x7C));
  CHECK(E5M2::has_negative_zero);
  CHECK(E5M2::code_dtype == DType::F8_E5M2);
  // The run-time description carries the same numbers.
  for (FormatId id : kFormats) {
    const FormatInfo info = format_info(id);
    CAPTURE(info.name);
    dispatch(id, [&info](auto traits) {
      using F = decltype(traits);
      CHECK(info.id == F::id);
      CHECK(fp8_code<F>(info.max_finite) == fp8_code<F>(F::max_finite));
      CHECK(fp8_code<F>(info.inf) == fp8_code<F>(F::inf));
      CHECK(bits(info.max_value) == bits(F::max_value));
      CHECK(info.code_dtype == F::code_dtype);
      CHECK(info.nan_codes == F::nan_codes);
    });
  }
}

TEST_CASE("dispatch, the format names of params, and the dtype of codes") {
  CHECK(parse_format("e4m3fn") == FormatId::E4M3FN);
  CHECK(parse_format("e4m3") == FormatId::E4M3FN);  // COAT's spelling
  CHECK(parse_format("e5m2") == FormatId::E5M2);
  for (const char* bad : {"", "E4M3", "e5m2fnuz", "fp8", "e4m3fn "}) CHECK_FALSE(parse_format(bad).has_value());
  CHECK_THROWS_WITH_AS(format_from_param("e3m4", "fp8"), "fp8 must be e4m3 (or e4m3fn) or e5m2 (got 'e3m4')",
                       std::runtime_error);
  CHECK(format_of_dtype(DType::F8_E4M3) == FormatId::E4M3FN);
  CHECK(format_of_dtype(DType::F8_E5M2) == FormatId::E5M2);
  CHECK_FALSE(format_of_dtype(DType::U8).has_value());
  for (FormatId id : kFormats) CHECK(dispatch(id, [](auto traits) { return decltype(traits)::id; }) == id);
  // The run-time decode is the typed one.
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    CHECK(bits(decode(FormatId::E4M3FN, code)) == bits(decode<E4M3FN>(code)));
    CHECK(bits(decode(FormatId::E5M2, code)) == bits(decode<E5M2>(code)));
  }
}

namespace {

// The other flavours of ml_dtypes' float8.h (its class comments and numeric_limits), written as
// traits specs: the generic decode serves them unchanged. The encoder does not know their zero and
// NaN rules yet and refuses them at compile time. No safetensors dtype of ours holds their codes.
struct E4M3FNUZSpec {  // float8_e4m3fnuz: bias 8, no Inf, NaN only 0x80, no -0
  [[maybe_unused]] static constexpr std::string_view name = "e4m3fnuz";  // the traits need them; no test reads them
  [[maybe_unused]] static constexpr DType code_dtype = DType::U8;
  static constexpr bool is_signed = true;
  static constexpr int exponent_bits = 4, mantissa_bits = 3, bias = 8;
  static constexpr bool has_zero = true, has_inf = false;
  static constexpr NanCodes nan_codes = NanCodes::NegativeZero;
};
struct E5M2FNUZSpec {  // float8_e5m2fnuz: bias 16, no Inf, NaN only 0x80, no -0
  [[maybe_unused]] static constexpr std::string_view name = "e5m2fnuz";  // the traits need them; no test reads them
  [[maybe_unused]] static constexpr DType code_dtype = DType::U8;
  static constexpr bool is_signed = true;
  static constexpr int exponent_bits = 5, mantissa_bits = 2, bias = 16;
  static constexpr bool has_zero = true, has_inf = false;
  static constexpr NanCodes nan_codes = NanCodes::NegativeZero;
};
struct E8M0FNUSpec {  // float8_e8m0fnu (OCP MX v1.0 scale): no sign, no zero, no Inf, NaN only 0xFF
  [[maybe_unused]] static constexpr std::string_view name = "e8m0fnu";  // the traits need them; no test reads them
  [[maybe_unused]] static constexpr DType code_dtype = DType::U8;
  static constexpr bool is_signed = false;
  static constexpr int exponent_bits = 8, mantissa_bits = 0, bias = 127;
  static constexpr bool has_zero = false, has_inf = false;
  static constexpr NanCodes nan_codes = NanCodes::AllOnes;
};

// sign * 2^(1-bias) * 0.m at exponent 0, sign * 2^(e-bias) * 1.m otherwise: the field formula in
// double, as ml_dtypes' comments state it for the signed flavours.
double signed_field_value(std::uint8_t code, int m_bits, int bias) {
  const int e = (code & 0x7F) >> m_bits, m = code & ((1 << m_bits) - 1);
  const double v = e == 0 ? std::ldexp(m, 1 - bias - m_bits) : std::ldexp((1 << m_bits) + m, e - bias - m_bits);
  return (code & 0x80) ? -v : v;
}

template <class Format, class Expected>
void check_decodes(Expected expected, int nans) {
  int seen = 0;
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    const float got = decode<Format>(code);
    CAPTURE(c);
    CHECK_FALSE(Format::is_inf(code));
    if (Format::is_nan(code)) {
      ++seen;
      CHECK(is_nan(got));
      continue;
    }
    CHECK(bits(static_cast<double>(got)) == bits(expected(code)));  // the sign of zero included
  }
  CHECK(seen == nans);
}

}  // namespace

TEST_CASE("the traits express the FNUZ formats and E8M0 (ml_dtypes float8.h), decoded by the generic code") {
  using E4M3FNUZ = Traits<E4M3FNUZSpec>;
  using E5M2FNUZ = Traits<E5M2FNUZSpec>;
  using E8M0FNU = Traits<E8M0FNUSpec>;
  // FNUZ: 0x80 is the only NaN, so every other code is a number and 0x7F the largest:
  // e4m3fnuz 1.875 * 2^(15-8) = 240, e5m2fnuz 1.75 * 2^(31-16) = 57344; smallest subnormals
  // 2^(1-8-3) = 2^-10 and 2^(1-16-2) = 2^-17.
  check_decodes<E4M3FNUZ>([](std::uint8_t c) { return signed_field_value(c, 3, 8); }, 1);
  check_decodes<E5M2FNUZ>([](std::uint8_t c) { return signed_field_value(c, 2, 16); }, 1);
  CHECK(E4M3FNUZ::is_nan(0x80));
  CHECK_FALSE(E4M3FNUZ::has_negative_zero);
  CHECK(code(E4M3FNUZ::max_finite) == code(0x7F));
  CHECK(value(E4M3FNUZ::max_value) == value(240.0f));
  CHECK(code(E4M3FNUZ::quiet_nan) == code(0x80));
  CHECK(bits(decode<E4M3FNUZ>(0x01)) == bits(std::ldexp(1.0f, -10)));
  CHECK(value(E5M2FNUZ::max_value) == value(57344.0f));
  CHECK(bits(decode<E5M2FNUZ>(0x01)) == bits(std::ldexp(1.0f, -17)));
  // E8M0: code c is 2^(c-127), 0x00 = 2^-127 (a binary32 subnormal) to 0xFE = 2^127; 0xFF NaN.
  check_decodes<E8M0FNU>([](std::uint8_t c) { return std::ldexp(1.0, c - 127); }, 1);
  CHECK(E8M0FNU::is_nan(0xFF));
  CHECK_FALSE(E8M0FNU::has_negative_zero);
  CHECK(code(E8M0FNU::max_finite) == code(0xFE));
  CHECK(bits(E8M0FNU::max_value) == bits(std::ldexp(1.0f, 127)));
  CHECK(code(E8M0FNU::quiet_nan) == code(0xFF));
  CHECK(bits(decode<E8M0FNU>(0x00)) == f32_bits(0x00400000u));  // 2^-127
  CHECK(bits(decode<E8M0FNU>(0x7F)) == bits(1.0f));
}
