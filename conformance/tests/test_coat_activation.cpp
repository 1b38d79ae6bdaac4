// COAT activation quantizers (docs/formats/coat-activation.md), one test per quirk. Expected values
// come from COAT's own kernels (golden/coat/, exported under Triton's interpreter), from the numbers
// that page and docs/formats/fp8.md state, or from exact reasoning written next to each check:
// never from the reference.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "bits_printer.hpp"
#include "elementwise.hpp"
#include "golden_fixture.hpp"
#include "lowbit/coat_activation.hpp"
#include "lowbit/cuda_libdevice.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"

using namespace lowbit;
using fp8::FormatId;
using namespace lowbit::coat_act;
using namespace lowbit::test;

namespace {

Options interp(int qb, FormatId f, ScaleDtype sd) { return {qb, f, sd, Division::Ieee, Casts::TritonInterpreter}; }

}  // namespace

TEST_CASE("codes use the fp32 scale S while the stored scale is bf16(S)") {
  // A group whose max is 1.0: RN(1 + 1e-10f) = 1, S = RN(1/448) = 0x3B124925
  // (docs/formats/coat-activation.md#arithmetic-all-fp32-rn-no-contraction);
  // bf16(S) = 0x3B12 (the low half 0x4925 < 0x8000, so RNE and truncation agree).
  std::vector<float> x(32 * 64, 0.25f);
  for (int r = 0; r < 32; ++r) x[static_cast<std::size_t>(r) * 64] = 1.0f;
  const Quantized q = quantize_pergroup(x, 32, 64, {16, FormatId::E4M3FN, ScaleDtype::BF16, Division::Ieee, Casts::Gpu});
  const float s = float_from_bits(0x3B124925u);
  CHECK(bits(q.scale[0]) == f32_bits(0x3B120000u));
  CHECK(e4m3(q.codes[0]) == e4m3(0x7E));  // 1/S = 448.0000x rounds to 448: the element equal to the group max
  CHECK(value(448.0f * q.scale[0]) != value(448.0f * s));  // the dequantized group max is off by bf16(S)/S
  const Quantized f = quantize_pergroup(x, 32, 64, {16, FormatId::E4M3FN, ScaleDtype::F32, Division::Ieee, Casts::Gpu});
  CHECK(bits(f.scale[0]) == f32_bits(0x3B124925u));
  CHECK(same_codes(f.codes, q.codes, fp8::FormatId::E4M3FN));  // the scale dtype changes the stored scale only

  // COAT's kernel (golden): its codes equal ours, and some group has code*scale_bf16 != code*S.
  const Case g = golden_case("coat/coat.act.pergroup/qb16.e4m3.bf16scale.float32.safetensors");
  const Case gf = golden_case("coat/coat.act.pergroup/qb16.e4m3.f32scale.float32.safetensors");
  const Tensor& in = g.require("input");
  const Quantized r = quantize_pergroup(in.f32(), 32, 64, interp(16, FormatId::E4M3FN, ScaleDtype::F32));
  CHECK(same_codes(r.codes, g.require("codes").u8(), fp8::FormatId::E4M3FN));
  int mismatched = 0;
  for (std::size_t grp = 0; grp < r.scale.size(); ++grp)
    if (g.require("scale").value_as_float(grp) != r.scale[grp]) ++mismatched;
  CHECK(mismatched > 0);
  CHECK(gf.require("scale").dtype == DType::F32);
  CHECK(g.require("scale").dtype == DType::BF16);
}

TEST_CASE("per-tensor group scaling: bf16 rounding of s puts |x|/s above 448 and saturation keeps it at 448") {
  // amax = 449: (449 + 1e-10)/448 = 1.00223 lies within half a bf16 ulp (2^-8) of 1, so s = 1.0 in
  // bf16 (RNE and truncation alike), and x/s = 449 > 448: satfinite gives 0x7E. The interpreter's
  // converter also gives 0x7E here (449 = 1.754*2^8: mantissa 110, first dropped bit 0).
  std::vector<float> x(32 * 64, 1.0f);
  x[5] = 449.0f;
  x[6] = -449.0f;
  for (Casts c : {Casts::Gpu, Casts::TritonInterpreter}) {
    const PerTensor q = quantize_pertensor_groupscale(x, 32, 64, {16, FormatId::E4M3FN, ScaleDtype::BF16, Division::Ieee, c});
    CHECK(value(q.scale) == value(1.0f));
    CHECK(e4m3(q.codes[5]) == e4m3(0x7E));
    CHECK(e4m3(q.codes[6]) == e4m3(0xFE));
  }
  // COAT's kernel (golden): some |x|/s exceeds 448 in the case built for it, and codes agree.
  const Case g = golden_case("coat/coat.act.pertensor.groupscale/qb16.e4m3.32x64.safetensors");
  const auto in = g.require("input").f32();
  const float s = g.require("scale").value_as_float(0);
  bool above = false;
  for (float v : in) above |= std::fabs(v) / s > 448.0f;
  CHECK(above);
  CHECK(same_codes(quantize_pertensor_groupscale(in, 32, 64, interp(16, FormatId::E4M3FN, ScaleDtype::BF16)).codes,
                   g.require("codes").u8(), fp8::FormatId::E4M3FN));
}

TEST_CASE("transposed per-group: y_t quantizes x^T with its own groups, so it is not y^T") {
  const Case g = golden_case("coat/coat.act.pergroup.transposed/qb16.e4m3.bf16scale.32x64.safetensors");
  const auto y = g.require("codes").u8();
  const auto yt = g.require("codes_t").u8();
  int differ = 0;
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 64; ++c) differ += y[r * 64 + c] != yt[c * 32 + r];
  CHECK(differ > 0);
  const Transposed t = quantize_pergroup_transposed(g.require("input").f32(), 32, 64, interp(16, FormatId::E4M3FN, ScaleDtype::BF16));
  CHECK(same_codes(t.rows.codes, y, fp8::FormatId::E4M3FN));
  CHECK(same_codes(t.transposed.codes, yt, fp8::FormatId::E4M3FN));
}

TEST_CASE("E5M2: Inf saturates to 57344 on the GPU; the interpreter keeps Inf") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(e5m2(cast_fp8(inf, FormatId::E5M2, Casts::Gpu)) == e5m2(0x7B));   // satfinite, 57344 (docs/formats/fp8.md)
  CHECK(e5m2(cast_fp8(-inf, FormatId::E5M2, Casts::Gpu)) == e5m2(0xFB));
  CHECK(e4m3(cast_fp8(inf, FormatId::E4M3FN, Casts::Gpu)) == e4m3(0x7E));   // 448
  CHECK(e5m2(cast_fp8(inf, FormatId::E5M2, Casts::TritonInterpreter)) == e5m2(0x7C));  // exponent field 31, mantissa 0
  CHECK(e4m3(cast_fp8(inf, FormatId::E4M3FN, Casts::TritonInterpreter)) == e4m3(0x78));  // exponent clamped to 15: 256
}

TEST_CASE("all-zero group: S = div(1e-10f, fp8_max) and the codes keep the sign of zero") {
  const Case g = golden_case("coat/coat.act.pergroup/qb16.e4m3.f32scale.float32.safetensors");
  CHECK(value(g.require("scale").value_as_float(0)) == value(1e-10f / 448.0f));  // IEEE division (the interpreter)
  const auto codes = g.require("codes").u8();
  for (int i = 0; i < 16; ++i) CHECK(e4m3(codes[i]) == e4m3((i % 2) ? 0x80 : 0x00));
}

TEST_CASE("NaN is ignored by the group max; its code is 0x7F on the GPU (0x7C under the interpreter)") {
  std::vector<float> x(32 * 64, 0.5f);
  x[0] = std::numeric_limits<float>::quiet_NaN();
  x[1] = 1.0f;
  const Quantized q = quantize_pergroup(x, 32, 64, {16, FormatId::E4M3FN, ScaleDtype::F32, Division::Ieee, Casts::Gpu});
  CHECK(bits(q.scale[0]) == f32_bits(0x3B124925u));  // RN(1/448): the NaN did not enter the max
  CHECK(e4m3(q.codes[0]) == e4m3(0x7F));
  const Case g = golden_case("coat/coat.act.pergroup/qb16.e4m3.f32scale.float32.safetensors");
  const auto in = g.require("input").f32();
  REQUIRE(is_nan(in[2 * 64 + 3]));
  CHECK(is_finite(g.require("scale").value_as_float(2 * 4)));
  CHECK(e4m3(g.require("codes").u8()[2 * 64 + 3]) == e4m3(0x7C));  // +NaN 0x7FC00000: exponent 15, mantissa 100
}

TEST_CASE("fp8 casts at ties and at 2^-10: GPU rounds to even, the interpreter away from zero") {
  CHECK(e4m3(cast_fp8(1.0625f, FormatId::E4M3FN, Casts::Gpu)) == e4m3(0x38));  // tie 1.0 | 1.125 -> even 1.0
  CHECK(e4m3(cast_fp8(1.0625f, FormatId::E4M3FN, Casts::TritonInterpreter)) == e4m3(0x39));  // away: 1.125
  CHECK(e4m3(cast_fp8(464.0f, FormatId::E4M3FN, Casts::Gpu)) == e4m3(0x7E));
  CHECK(e4m3(cast_fp8(-0.0f, FormatId::E4M3FN, Casts::Gpu)) == e4m3(0x80));
  CHECK(e4m3(cast_fp8(0.0009765625f, FormatId::E4M3FN, Casts::Gpu)) == e4m3(0x00));  // 2^-10: tie with 2^-9 -> even 0
  CHECK(e4m3(cast_fp8(1.9375f, FormatId::E4M3FN, Casts::TritonInterpreter)) == e4m3(0x38));  // carry OR-ed into odd exponent: 1.0
  // COAT's kernel (golden): the group with max 448 has S = 1, so its codes are plain casts
  const Case g = golden_case("coat/coat.act.pergroup/qb16.e4m3.f32scale.float32.safetensors");
  CHECK(value(g.require("scale").value_as_float(4)) == value(1.0f));
  CHECK(e4m3(g.require("codes").u8()[64]) == e4m3(0x39));  // 1.0625 -> 1.125 under the interpreter
}

TEST_CASE("shapes COAT cannot handle are rejected") {
  const std::vector<float> x(16 * 64, 1.0f);
  const Options o{16, FormatId::E4M3FN, ScaleDtype::BF16, Division::Ieee, Casts::Gpu};
  CHECK_THROWS_AS(quantize_pergroup(x, 16, 64, o), std::invalid_argument);  // M % 2QB
  CHECK_THROWS_AS(quantize_pergroup(x, 32, 32, o), std::invalid_argument);  // N % 4QB
  CHECK_THROWS_AS(quantize_pertensor_groupscale(x, 16, 64, o), std::invalid_argument);
  CHECK_THROWS_AS(quantize_perblock(std::vector<float>(24 * 32), 24, 32, o), std::invalid_argument);
  CHECK_THROWS_AS(quantize_pergroup_transposed(std::vector<float>(24 * 32), 24, 32, o), std::invalid_argument);
  CHECK_NOTHROW(quantize_pergroup_transposed(std::vector<float>(16 * 48), 16, 48, o));
  Options bad = o;
  bad.group_size = 8;
  CHECK_THROWS_AS(quantize_perblock(std::vector<float>(16 * 16), 16, 16, bad), std::invalid_argument);
}

TEST_CASE("div-full divides by the measured reciprocal, ieee by IEEE division") {
  CHECK(value(div(1.0f, 448.0f, Division::Ieee)) == value(float_from_bits(0x3B124925u)));
  // 448 = 1.75 * 2^8; test_rcp_table holds cuda::rcp_approx_ftz against the measured table itself.
  CHECK(value(div(1.0f, 448.0f, Division::DivFull)) == value(cuda::rcp_approx_ftz(448.0f)));
  CHECK(value(div(3.0f, 7.0f, Division::DivFull)) == value(3.0f * cuda::rcp_approx_ftz(7.0f)));
}
