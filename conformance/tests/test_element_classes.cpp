// Element classes name a cause only where that cause alone explains the element (issue 28): wrong
// kernels computed here, each by its own arithmetic (not the mutants', not the diagnosis' variants),
// compared with the reference on the battery's boundary inputs. A ties-away or ties-down kernel's
// codes are ties (never the reciprocal, which also lands on the other side of a midpoint); a
// truncating or f16-double-rounding cast's zeros are not flushes where rounding reaches zero; a
// dequantized value flushed to zero, its code right, is a flush (never an arithmetic variant); a
// bitsandbytes table-index rounding bug is not called a division.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "lowbit/codebook.hpp"
#include "lowbit/compare.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/fp8.hpp"
#include "lowbit/generators.hpp"

using namespace lowbit;

namespace {

Case reference_on(const std::string& format, const std::vector<float>& x) {
  const FormatSpec& f = *find_format(format);
  Case c;
  c.metadata["format"] = format;
  c.metadata["params"] = f.default_params.dump();
  c.add(Tensor::from_f32("input", {static_cast<std::int64_t>(x.size())}, x));
  if (f.auxiliary_inputs)
    for (Tensor& t : f.auxiliary_inputs(f.default_params)) c.add(std::move(t));
  return run_reference(f, c);
}

Case reference_on(const std::string& format, const std::string& spec) {
  const FormatSpec& f = *find_format(format);
  return reference_on(format, generate_inputs(parse_input_spec(spec), f, f.default_params));
}

// The case with its codes replaced and its dequant made from them by the format's dequantizer.
Case with_codes(const Case& e, const std::vector<std::uint8_t>& codes) {
  Case a = e;
  const Tensor& old = e.require("codes");
  a.add(Tensor::from_bytes("codes", old.dtype, old.shape, codes));
  const FormatSpec& f = *find_format(e.format());
  a.add(Tensor::from_f32("dequant", e.require("dequant").shape, f.dequantize(a, resolve_params(f, e.params()))));
  return a;
}

std::uint64_t count(const TensorComparison& t, MismatchClass c) { return t.by_class[static_cast<std::size_t>(c)]; }

const TensorComparison& tensor(const ComparisonReport& r, const std::string& name) {
  for (const TensorComparison& t : r.tensors)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  return r.tensors.front();
}

// The kernel's codes (`moved` of them off the reference's, each on a tie) compared: every differing
// code and dequantized value a tie, none the reciprocal.
void check_all_ties(const Case& e, const std::vector<std::uint8_t>& codes, std::size_t moved) {
  REQUIRE(moved > 100);
  const ComparisonReport r = compare_cases(e, with_codes(e, codes), TolerancePolicy{});
  for (const char* name : {"codes", "dequant"}) {
    CAPTURE(name);
    const TensorComparison& t = tensor(r, name);
    CHECK(t.mismatches == moved);
    CHECK(count(t, MismatchClass::Tie) == moved);
    CHECK(count(t, MismatchClass::ArithmeticVariant) == 0);
  }
}

float e4m3(std::uint8_t c) { return fp8::decode<fp8::E4M3FN>(c); }

// The E4M3 code of |y| rounded toward zero: the largest magnitude whose value is at most |y|
// (saturating at 448), found by walking the codes in order.
std::uint8_t e4m3_toward_zero(float y) {
  const auto sign = static_cast<std::uint8_t>(std::signbit(y) ? 0x80 : 0);
  std::uint8_t m = 0;
  while (m < 0x7E && e4m3(static_cast<std::uint8_t>(m + 1)) <= std::fabs(y)) ++m;
  return sign | m;
}

}  // namespace

TEST_CASE("ties away from zero on torchao.fp8's scaled edges: every differing code is a tie, none a reciprocal") {
  const Case e = reference_on("torchao.fp8", "scaled-edges");
  const std::vector<float> x = e.require("input").f32(), s = e.require("scale").f32();
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  const std::size_t block = 256;
  std::size_t moved = 0;
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const float y = x[i] / s[i / block];
    const std::uint8_t m = codes[i] & 0x7F;
    if (std::isnan(y) || m >= 0x7E) continue;
    // the exact midpoint between the code nearest even and the next magnitude up: away from zero
    const double mid = (double(e4m3(m)) + double(e4m3(static_cast<std::uint8_t>(m + 1)))) / 2;
    if (std::fabs(double(y)) == mid) {
      codes[i] = static_cast<std::uint8_t>((codes[i] & 0x80) | (m + 1));
      ++moved;
    }
  }
  check_all_ties(e, codes, moved);
}

TEST_CASE("ties down on torchao's codebook: ties on its own test or the exact midpoint, none a reciprocal") {
  const Case e = reference_on("torchao.codebook8.signed", "scaled-edges");
  const std::vector<float> x = e.require("input").f32(), s = e.require("scale").f32(), q = e.require("qmap").f32();
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  std::size_t moved = 0;
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const float y = x[i] / s[i / 256];
    const std::size_t c = codes[i];
    if (c == 0) continue;
    // torchao's own test with ties down: the code below where y - lo equals half the gap exactly
    const float lo = q[c - 1], hi = q[c];
    if (y - lo == (hi - lo) * 0.5f || double(y) == (double(lo) + double(hi)) / 2) {
      codes[i] = static_cast<std::uint8_t>(c - 1);
      ++moved;
    }
  }
  check_all_ties(e, codes, moved);
}

TEST_CASE("rounding toward zero and double rounding through f16: zeros within rounding reach are no flush") {
  const Case e = reference_on("fp8.e4m3fn.satfinite", "edges");
  const std::vector<float> x = e.require("input").f32();
  SUBCASE("toward zero") {
    std::vector<std::uint8_t> codes = e.require("codes").u8();
    for (std::size_t i = 0; i < codes.size(); ++i)
      if (std::isfinite(x[i])) codes[i] = e4m3_toward_zero(x[i]);
    const ComparisonReport r = compare_cases(e, with_codes(e, codes), TolerancePolicy{});
    const TensorComparison& c = tensor(r, "codes");
    REQUIRE(c.mismatches > 0);
    CHECK(count(c, MismatchClass::FlushedSubnormal) == 0);
    CHECK(count(tensor(r, "dequant"), MismatchClass::FlushedSubnormal) == 0);
    // what is a tie is an input exactly on the midpoint the reference rounded up from
    for (const MismatchRecord& m : c.first_mismatches)
      if (m.why.cls == MismatchClass::Tie) CHECK(m.why.boundary == m.why.input);
  }
  SUBCASE("through f16") {
    std::vector<std::uint8_t> codes = e.require("codes").u8();
    std::size_t zeroed = 0;
    for (std::size_t i = 0; i < codes.size(); ++i) {
      const auto h = static_cast<_Float16>(x[i]);  // the compiler's float -> f16, round to nearest even
      codes[i] = fp8::encode_nearest_even<fp8::E4M3FN>(static_cast<float>(h), fp8::cuda_satfinite());
      zeroed += (codes[i] & 0x7F) == 0 && (e.require("codes").bytes[i] & 0x7F) != 0;
    }
    REQUIRE(zeroed > 0);  // x just above half the smallest subnormal rounds onto it in f16, then to even: zero
    const ComparisonReport r = compare_cases(e, with_codes(e, codes), TolerancePolicy{});
    CHECK(tensor(r, "codes").mismatches > 0);
    CHECK(count(tensor(r, "codes"), MismatchClass::FlushedSubnormal) == 0);
  }
  SUBCASE("a kernel that does flush: its zeros no rounding reaches show it, and then every zero is a flush") {
    std::vector<std::uint8_t> codes = e.require("codes").u8();
    for (std::uint8_t& c : codes)
      if ((c & 0x78) == 0) c &= 0x80;
    const ComparisonReport r = compare_cases(e, with_codes(e, codes), TolerancePolicy{});
    const TensorComparison& c = tensor(r, "codes");
    CHECK(c.mismatches > 0);
    CHECK(count(c, MismatchClass::FlushedSubnormal) == c.mismatches);
    CHECK(count(tensor(r, "dequant"), MismatchClass::FlushedSubnormal) == c.mismatches);
  }
  SUBCASE("the reciprocal on torchao.fp8: its codes off a tie show it, so its codes on a tie are the variant too") {
    const Case s = reference_on("torchao.fp8", "scaled-edges");
    const std::vector<float> in = s.require("input").f32(), scale = s.require("scale").f32();
    std::vector<std::uint8_t> codes = s.require("codes").u8();
    for (std::size_t i = 0; i < codes.size(); ++i)
      codes[i] = fp8::encode_nearest_even<fp8::E4M3FN>(in[i] * (1.0f / scale[i / 256]), fp8::torch_eager<fp8::E4M3FN>());
    const ComparisonReport r = compare_cases(s, with_codes(s, codes), TolerancePolicy{});
    const TensorComparison& c = tensor(r, "codes");
    CHECK(c.mismatches > 100);
    CHECK(count(c, MismatchClass::ArithmeticVariant) == c.mismatches);
  }
}

TEST_CASE("bnb.blockwise8: a dequantized value flushed to zero, its code right, is a flush, never a division") {
  // blocks of tiny values: qmap entries times an absmax of 1e-36 are float32 subnormals
  std::vector<float> x;
  for (int i = 0; i < 4096; ++i) x.push_back(1e-36f * std::sin(0.37f * static_cast<float>(i)));
  const Case e = reference_on("bnb.blockwise8.dynamic", x);
  Case a = e;
  std::vector<float> d = e.require("dequant").f32();
  std::size_t flushed = 0;
  for (float& v : d)
    if (v != 0.0f && std::fpclassify(v) == FP_SUBNORMAL) {
      v = std::copysign(0.0f, v);
      ++flushed;
    }
  REQUIRE(flushed > 10);
  a.add(Tensor::from_f32("dequant", e.require("dequant").shape, d));
  const ComparisonReport r = compare_cases(e, a, TolerancePolicy{});
  const TensorComparison& t = tensor(r, "dequant");
  CHECK(t.mismatches == flushed);
  CHECK(count(t, MismatchClass::FlushedSubnormal) == flushed);
}

TEST_CASE("bnb.blockwise8: the CPU table indexed without its rounding half is never called a division") {
  const Case e = reference_on("bnb.blockwise8.dynamic", "scaled-edges");
  const std::vector<float> x = e.require("input").f32(), s = e.require("scale").f32(), q = e.require("qmap").f32();
  const codebook::BnbCpuLut lut(q);
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const float a = s[i / 4096];
    if (!std::isfinite(a) || a == 0.0f || std::isnan(x[i])) continue;
    const float y = std::clamp(x[i] * (1.0f / a), -1.0f, 1.0f);
    codes[i] = lut.table()[static_cast<std::size_t>((y + 1.0f) * 0.5f * 65535.0f)];  // the cell below, not the nearest
  }
  const ComparisonReport r = compare_cases(e, with_codes(e, codes), TolerancePolicy{});
  const TensorComparison& c = tensor(r, "codes");
  REQUIRE(c.mismatches > 100);
  CHECK(count(c, MismatchClass::ArithmeticVariant) == 0);
}

TEST_CASE("torchao 4-bit: packed bytes that only repeat a codes mismatch follow it; a packed byte wrong alone is genuine") {
  const Case e = reference_on("torchao.codebook4.signed", "normal:n=4096,seed=1");
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  // one code of each of 40 pairs moved to its neighbour, and the pairs packed again as torchao packs
  // them (codes[::2] << 4 | codes[1::2]), by hand
  for (std::size_t i = 3; i < 3 + 40 * 97; i += 97) codes[i] = codes[i] == 15 ? 14 : codes[i] + 1;
  Case a = e;
  a.add(Tensor::from_bytes("codes", DType::U8, e.require("codes").shape, codes));
  std::vector<std::uint8_t> packed(codes.size() / 2);
  for (std::size_t j = 0; j < packed.size(); ++j) packed[j] = static_cast<std::uint8_t>(codes[2 * j] << 4 | codes[2 * j + 1]);
  a.add(Tensor::from_bytes("codes_packed", DType::U8, e.require("codes_packed").shape, packed));
  // and one packed byte wrong where its codes are right
  packed[2] ^= 0x01;  // codes 4 and 5: not moved
  a.add(Tensor::from_bytes("codes_packed", DType::U8, e.require("codes_packed").shape, packed));
  const ComparisonReport r = compare_cases(e, a, TolerancePolicy{});
  const TensorComparison& p = tensor(r, "codes_packed");
  CHECK(tensor(r, "codes").mismatches == 40);
  CHECK(p.mismatches == 41);
  CHECK(count(p, MismatchClass::FollowsCodes) == 40);
  CHECK(count(p, MismatchClass::Genuine) == 1);
  CHECK(p.allowed == 40);  // judged once, in the codes tensor
  CHECK_FALSE(r.conformant);
}

TEST_CASE("bnb.blockwise8: a zero dequantized from another code is that code's mismatch, never a flush") {
  // blocks of absmax 1e-40: every nonzero dequantized value is a float32 subnormal. A kernel that gives
  // some elements the code of the table's 0 entry (the signed dynamic map's code 127, found here by
  // value) dequantizes them to zero: the cause is the code, whose class its dequant shares.
  std::vector<float> x;
  for (int i = 0; i < 4096; ++i) x.push_back(1e-40f * std::sin(0.37f * static_cast<float>(i) + 0.1f));
  const Case e = reference_on("bnb.blockwise8.dynamic", x);
  const std::vector<float> q = e.require("qmap").f32(), want = e.require("dequant").f32();
  const auto zero = static_cast<std::uint8_t>(std::find(q.begin(), q.end(), 0.0f) - q.begin());
  REQUIRE(zero < q.size());
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  std::size_t moved = 0;
  for (std::size_t i = 0; i < codes.size(); i += 7)
    if (std::fpclassify(want[i]) == FP_SUBNORMAL && codes[i] != zero) {
      codes[i] = zero;
      ++moved;
    }
  REQUIRE(moved > 100);
  const ComparisonReport r = compare_cases(e, with_codes(e, codes), TolerancePolicy{});
  const TensorComparison& c = tensor(r, "codes");
  const TensorComparison& d = tensor(r, "dequant");
  CHECK(c.mismatches == moved);
  CHECK(d.mismatches == moved);
  CHECK(count(d, MismatchClass::FlushedSubnormal) == 0);
  for (const MismatchClass k : kMismatchClasses) CHECK(count(d, k) == count(c, k));
}
