// The battery's 16-bit inputs: all-bf16 and all-f16 (every bit pattern of the 16-bit float as its
// value), the dtype key that makes an input tensor of BF16 or F16 (narrowed_bits), and which formats'
// default batteries run them. The expected bits come from the patterns themselves (a 16-bit pattern h
// is the h-th element; widened by float_bits.hpp, which test_fp8 checks) and from exact arithmetic in
// double, not from the narrowing under test.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "lowbit/case_maker.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/generators.hpp"

using namespace lowbit;

namespace {

// The input tensor of the one case a spec makes for a format (its defaults).
Tensor input_of(const char* format, const std::string& spec) {
  const FormatSpec& f = *find_format(format);
  Tensor out;
  for_each_case(f, f.default_params, parse_input_spec(spec), 1, {"test", "test_input_dtypes"}, [&](CaseToRun c) {
    out = c.inputs.require("input");
    return c.inputs;
  });
  return out;
}

float widened(DType d, std::uint16_t h) { return d == DType::BF16 ? widen_bf16(h) : widen_f16(h); }

}  // namespace

TEST_CASE("all-bf16 and all-f16: every bit pattern, in order, as float32 or as the 16-bit dtype itself") {
  for (const DType d : {DType::BF16, DType::F16}) {
    const std::string name = d == DType::BF16 ? "bf16" : "f16";
    CAPTURE(name);
    const Tensor as_f32 = input_of("fp8.e4m3fn.satfinite", "all-" + name);
    REQUIRE(as_f32.dtype == DType::F32);
    REQUIRE(as_f32.element_count() == 65536);
    const Tensor as_16 = input_of("fp8.e4m3fn.satfinite", "all-" + name + ":dtype=" + name);
    REQUIRE(as_16.dtype == d);
    REQUIRE(as_16.element_count() == 65536);
    std::size_t wrong = 0;
    for (std::uint32_t h = 0; h < 65536; ++h) {
      wrong += as_16.bits_at(h) != h;  // NaN payloads and signalling NaNs included
      wrong += as_f32.bits_at(h) != bits_of(widened(d, static_cast<std::uint16_t>(h)));
    }
    CHECK(wrong == 0);
  }
  // a prefix with n, as every fixed list
  CHECK(input_of("fp8.e5m2.inf", "all-f16:n=3,dtype=f16").element_count() == 3);
}

TEST_CASE("dtype narrows a generated input to nearest, ties to even; a NaN keeps its sign and top payload") {
  for (const DType d : {DType::BF16, DType::F16}) {
    const std::string name = d == DType::BF16 ? "bf16" : "f16";
    CAPTURE(name);
    const std::vector<float> x = generate_inputs(parse_input_spec("lognormal:n=4096,seed=3,sigma=6"), FormatSpec{}, {});
    const Tensor t = input_of("bnb.blockwise8.dynamic", "lognormal:n=4096,seed=3,sigma=6,dtype=" + name);
    REQUIRE(t.dtype == d);
    REQUIRE(t.element_count() == x.size());
    std::size_t not_nearest = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const auto h = static_cast<std::uint16_t>(t.bits_at(i));
      // the chosen value is at least as near as both neighbours, in exact double arithmetic (a value
      // beyond the largest finite one: Inf of its sign where it rounds there)
      const double v = widened(d, h), xi = x[i];
      if (std::isinf(v)) {
        const double largest = d == DType::BF16 ? widen_bf16(0x7F7F) : 65504.0;
        const double step = d == DType::BF16 ? largest - widen_bf16(0x7F7E) : 32.0;
        not_nearest += !(std::fabs(xi) >= largest + step / 2);
        continue;
      }
      for (const int k : {-1, 1}) {
        const auto other = static_cast<std::uint16_t>(h + k);
        const double w = widened(d, other);
        if (std::isnan(w) || std::isinf(w) || (h & 0x7FFF) + k < 0) continue;
        const double mine = std::fabs(xi - v), theirs = std::fabs(xi - w);
        not_nearest += mine > theirs || (mine == theirs && (h & 1u));
      }
    }
    CHECK(not_nearest == 0);
  }
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(narrowed_bits(DType::F16, float_from_bits(0x7F800001u)) == 0x7E00u);  // payload below f16's: still a NaN
  CHECK(narrowed_bits(DType::F16, float_from_bits(0xFF802000u)) == 0xFC01u);  // sign and top payload kept
  CHECK(narrowed_bits(DType::BF16, float_from_bits(0x7F800001u)) == 0x7FC0u);
  CHECK(narrowed_bits(DType::BF16, float_from_bits(0xFFA10000u)) == 0xFFA1u);
  CHECK(narrowed_bits(DType::F16, 1e6f) == 0x7C00u);
  CHECK(narrowed_bits(DType::BF16, -inf) == 0xFF80u);
  CHECK_THROWS_WITH_AS(parse_input_spec("normal:dtype=f64"), "input spec 'normal:dtype=f64': dtype must be f32, bf16 or f16 (got 'f64')",
                       std::invalid_argument);
}

TEST_CASE("an optimizer's battery spec refuses dtype: its param and grad are float32") {
  const FormatSpec& f = *find_format("torchao.adam.codebook8");
  CHECK_THROWS_WITH_AS(for_each_case(f, f.default_params, parse_input_spec("normal:n=64,dtype=bf16"), 1, {"t", "t"},
                                     [](CaseToRun c) { return c.inputs; }),
                       "input spec 'normal:n=64,dtype=bf16': torchao.adam.codebook8 steps float32 parameters and "
                       "gradients; drop dtype",
                       std::invalid_argument);
}

TEST_CASE("the default battery runs 16-bit inputs for every format whose input takes them, and only those") {
  for (const FormatSpec& f : registered_formats()) {
    CAPTURE(f.name);
    std::set<std::string> specs;
    for (const InputRun& run : default_input_runs(f)) specs.insert(run.spec);
    const TensorSpec* input = f.tensor("input");
    const auto takes = [&](DType d) {
      return input && std::find(input->schema.dtypes.begin(), input->schema.dtypes.end(), d) != input->schema.dtypes.end();
    };
    const bool elementwise = f.name.starts_with("fp8.e");
    for (const DType d : {DType::BF16, DType::F16}) {
      const std::string name = d == DType::BF16 ? "bf16" : "f16";
      std::size_t with_dtype = 0;
      for (const std::string& s : specs) with_dtype += s.ends_with("dtype=" + name);
      if (!takes(d)) {
        CHECK(with_dtype == 0);
        continue;
      }
      if (elementwise) {
        CHECK(specs.count("all-" + name));  // every pattern as float32: the short mantissas
        CHECK(specs.count("all-" + name + ":dtype=" + name));
        CHECK(with_dtype == 1);
      } else {
        CHECK(specs.count("special-blocks:dtype=" + name));
        CHECK(with_dtype == 2);
      }
    }
  }
  // the formats that take them, from their registry entries
  CHECK(find_format("fp8.e5m2.inf")->tensor("input")->schema.dtypes.size() == 3);
  CHECK(find_format("bnb.blockwise8.linear")->tensor("input")->schema.dtypes.size() == 3);
  CHECK(find_format("coat.act.perblock")->tensor("input")->schema.dtypes.size() == 2);
}
