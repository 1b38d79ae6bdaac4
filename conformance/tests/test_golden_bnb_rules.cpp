// The rules of bitsandbytes' other 8-bit CPU optimizers (docs/formats/bnb-{lion,ademamix,momentum,
// rmsprop,adagrad}8bit.md) read from the golden cases bitsandbytes 0.50.2 itself made
// (tools/export/export_bnb_optimizers.py): the library's bits are the expected values. Each test
// checks the bits that carry a rule, that the reference reproduces them, and where the rule is a
// choice (fused or not, which NaN, what counts as library rounding) that the other choice does not.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "golden_fixture.hpp"
#include "lowbit/compare.hpp"

using namespace lowbit;
using lowbit::test::golden_case;

namespace {

// The golden case against the reference run on its inputs with `cpu_capability` set to `capability`,
// under the format's own policy.
ComparisonReport reference_at(const Case& golden, const std::string& capability) {
  Case in = golden;
  nlohmann::json params = golden.params();
  params["cpu_capability"] = capability;
  in.metadata["params"] = params.dump();
  const FormatSpec& format = *find_format(golden.format());
  return compare_cases(golden, run_reference(format, in), load_tolerance_policy(format.default_tolerance, LOWBIT_POLICY_DIR));
}

std::uint32_t param_bits(const Case& c, const char* tensor, std::size_t i) {
  return static_cast<std::uint32_t>(c.require(tensor).bits_at(i));
}

const char* const kFormats[] = {"bnb.lion8bit.cpu", "bnb.ademamix8bit.cpu", "bnb.momentum8bit.cpu", "bnb.rmsprop8bit.cpu",
                                "bnb.adagrad8bit.cpu"};

}  // namespace

TEST_CASE("bnb rules: the CPU capability decides whether add(alpha) and addcmul fuse, in the library's own bits") {
  // every format has an AVX2 case that the unfused arithmetic does not reproduce; all but Lion a
  // default-capability case that the fused arithmetic does not (Lion's 549-element case happens to
  // agree both ways: its AVX2 cases decide)
  for (const char* format : kFormats) {
    CAPTURE(format);
    bool avx2_decides = false, default_decides = false;
    for (const ManifestEntry* e : test::golden_entries(format)) {
      const Case golden = golden_case(*e);
      const std::string own = golden.params().value("cpu_capability", std::string("avx2"));
      CHECK(reference_at(golden, own).conformant);
      if (own == "avx2") avx2_decides = avx2_decides || !reference_at(golden, "default").conformant;
      if (own == "default") default_decides = default_decides || !reference_at(golden, "avx2").conformant;
    }
    CHECK(avx2_decides);
    CHECK(default_decides == (std::string(format) != "bnb.lion8bit.cpu"));
  }
}

TEST_CASE("bnb rules: Lion's sign of a NaN is 0, so a NaN gradient leaves the parameter (decayed) in place") {
  // lion-wd-tail: grad[7 + step] is NaN from step 2, weight decay 0.01, lr 1e-3
  const Case c = golden_case("bnb/bnb.lion8bit.cpu/lion-wd-tail.step2.safetensors");
  REQUIRE(std::isnan(c.require("grad").value_as_float(9)));
  const float p = c.require("param").value_as_float(9);
  const float decayed = p * static_cast<float>(1.0 - 1e-3 * 1e-2);
  CHECK(param_bits(c, "param.next", 9) == std::bit_cast<std::uint32_t>(decayed));
  CHECK(reference_at(c, "avx2").conformant);
}

TEST_CASE("bnb rules: torch's CPU sqrt of a negative state is +NaN 0x7FC00000 (RMSprop and Adagrad after an Inf absmax)") {
  for (const char* path : {"bnb/bnb.rmsprop8bit.cpu/rmsprop-wd-tail.step4.safetensors",
                           "bnb/bnb.adagrad8bit.cpu/adagrad-wd-tail.step4.safetensors"}) {
    CAPTURE(path);
    const Case c = golden_case(path);
    const Case ours = run_reference(*find_format(c.format()), c);
    std::size_t positive_nan = 0;
    for (std::size_t i = 0; i < c.require("param.next").element_count(); ++i) {
      const std::uint32_t want = param_bits(c, "param.next", i);
      if (want == 0x7FC00000u && !std::isnan(c.require("param").value_as_float(i))) {
        ++positive_nan;
        CHECK(param_bits(ours, "param.next", i) == want);
      }
    }
    CHECK(positive_nan == 288);  // new NaNs, all torch's: x86's sqrtss would have given 0xFFC00000
    CHECK(reference_at(c, "avx2").conformant);
  }
}

TEST_CASE("bnb rules: a parameter no faithful sqrt explains is genuine, also where torch's sqrt differences are allowed") {
  for (const char* path : {"bnb/bnb.rmsprop8bit.cpu/rmsprop.step2.safetensors", "bnb/bnb.adagrad8bit.cpu/adagrad.step2.safetensors",
                           "bnb/bnb.ademamix8bit.cpu/ademamix.step2.safetensors"}) {
    CAPTURE(path);
    const Case expected = golden_case(path);
    const FormatSpec& format = *find_format(expected.format());
    const TolerancePolicy policy = load_tolerance_policy(format.default_tolerance, LOWBIT_POLICY_DIR);
    Case actual = run_reference(format, expected);
    const ComparisonReport as_is = compare_cases(expected, actual, policy);
    CHECK(as_is.conformant);
    std::vector<float> p = actual.require("param.next").f32();
    for (int k = 0; k < 5; ++k) p[100] = std::nextafter(p[100], INFINITY);  // five ulps off: no sqrt rounding does that
    actual.add(Tensor::from_f32("param.next", actual.require("param.next").shape, p));
    const ComparisonReport moved = compare_cases(expected, actual, policy);
    CHECK_FALSE(moved.conformant);
    for (const TensorComparison& t : moved.tensors)
      if (t.name == "param.next") CHECK(t.by_class[static_cast<std::size_t>(MismatchClass::Genuine)] == 1);
  }
}
