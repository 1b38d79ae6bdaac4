// Every format's tensor schema against hostile cases: a complete case of each registered format (its
// golden case, or one the reference makes where no library produced one) must pass, and each
// mutation of it (a tensor dropped, given a dtype the format does not take, made one element short, a
// code outside its table, a parameter of the wrong type or range) must be refused with a CaseError
// naming the file and the tensor or parameter, by validate_case and by every entry point that reads
// the case (run_reference, dequantized_state, compare_cases). Run under ASan/UBSan in the sanitize
// preset: no mutation may read out of bounds on its way to that error.
#include <doctest/doctest.h>

#include <algorithm>

#include "golden_fixture.hpp"
#include "lowbit/compare.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/schema.hpp"

namespace lowbit {
namespace {

// A complete case of the format: its first golden case, else one the reference completes from a fresh
// optimizer state or a small float32 input (the schema, not the values, is under test here).
Case complete_case(const FormatSpec& f) {
  if (const auto golden = test::golden_entries(f.name); !golden.empty()) return test::golden_case(*golden.front());
  Case in;
  if (f.fresh_state) {
    std::vector<float> param(4096);
    for (std::size_t i = 0; i < param.size(); ++i) param[i] = static_cast<float>(i % 97) / 97.0f - 0.5f;
    in = f.fresh_state(param, f.default_params);
  } else {
    std::vector<float> x(384);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 29) - 14.0f;
    in.add(Tensor::from_f32("input", {static_cast<std::int64_t>(x.size())}, x));
    if (f.auxiliary_inputs)
      for (Tensor& t : f.auxiliary_inputs(f.default_params)) in.add(std::move(t));
  }
  in.metadata["format"] = f.name;
  in.origin = "made.safetensors";
  Case c = run_reference(f, in);
  c.origin = "made.safetensors";
  return c;
}

// The same tensor with `count` elements of `dtype`, flat, its bytes cycled from the original's.
Tensor reshaped(const Tensor& t, DType dtype, std::size_t count) {
  std::vector<std::uint8_t> bytes(count * dtype_size(dtype));
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = t.bytes.empty() ? 0 : t.bytes[i % t.bytes.size()];
  return Tensor::from_bytes(t.name, dtype, {static_cast<std::int64_t>(count)}, bytes);
}

Case without(const Case& c, const std::string& name) {
  Case out = c;
  out.remove(name);
  return out;
}

Case with(const Case& c, Tensor t) {
  Case out = c;
  out.add(std::move(t));
  return out;
}

bool is_referenced(const FormatSpec& f, const std::string& name) {
  for (const auto* list : {&f.inputs, &f.optional_inputs, &f.outputs})
    for (const TensorSpec& t : *list)
      if (t.schema.shape.of == name) return true;
  return false;
}

// A mutated case must be refused naming the file and `named`; every entry point refuses it or, for
// one that does not need the mutated tensor, reads it without fault.
void check_refused(const FormatSpec& f, const Case& bad, CaseScope scope, const std::string& named) {
  CAPTURE(named);
  try {
    validate_case(f, bad, scope);
    FAIL("validate_case accepted the mutation");
  } catch (const CaseError& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.starts_with(bad.origin + ": "));
    CHECK(what.find(named) != std::string::npos);
  }
  for (auto entry : {+[](const FormatSpec& s, const Case& c) { (void)run_reference(s, c); },
                     +[](const FormatSpec& s, const Case& c) { (void)dequantized_state(s, c); },
                     +[](const FormatSpec&, const Case& c) { (void)compare_cases(c, c, TolerancePolicy{}); }}) {
    try {
      entry(f, bad);
    } catch (const CaseError& e) {
      CHECK(std::string(e.what()).starts_with(bad.origin + ": "));
    }
  }
}

TEST_CASE("a complete case of every registered format passes its schema; every mutation of a tensor is refused") {
  std::size_t formats = 0, mutations = 0;
  for (const FormatSpec& f : registered_formats()) {
    CAPTURE(f.name);
    const Case good = complete_case(f);
    CHECK_NOTHROW(validate_case(f, good, CaseScope::Complete));
    CHECK_NOTHROW((void)dequantized_state(f, good));
    ++formats;
    for (const auto* list : {&f.inputs, &f.optional_inputs, &f.outputs})
      for (const TensorSpec& spec : *list) {
        const Tensor* t = good.find(spec.name);
        if (!t) continue;  // an optional input the params do not ask for
        CAPTURE(spec.name);
        const std::string quoted = "'" + spec.name + "'";
        if (list != &f.optional_inputs) {
          check_refused(f, without(good, spec.name), CaseScope::Complete, quoted);
          ++mutations;
        }
        if (!spec.schema.dtypes.empty()) {
          const DType other = std::ranges::find(spec.schema.dtypes, DType::I64) == spec.schema.dtypes.end() ? DType::I64 : DType::U8;
          check_refused(f, with(good, reshaped(*t, other, t->element_count())), CaseScope::Present, quoted);
          ++mutations;
        }
        if (spec.schema.shape.kind != ShapeRule::Kind::Any || is_referenced(f, spec.name)) {
          const std::size_t n = t->element_count();
          check_refused(f, with(good, reshaped(*t, t->dtype, n > 1 ? n - 1 : n + 1)), CaseScope::Present, quoted);
          ++mutations;
        }
      }
  }
  CHECK(formats == registered_formats().size());
  MESSAGE(formats << " formats, " << mutations << " mutations refused");
}

TEST_CASE("an empty or short qmap, a short scale and a 4-bit code outside its table are refused before any arithmetic") {
  const FormatSpec& f4 = *find_format("torchao.codebook4.signed");
  const Case good = complete_case(f4);
  const Tensor& qmap = good.require("qmap");
  check_refused(f4, with(good, reshaped(qmap, DType::F32, 0)), CaseScope::Present,
                "tensor 'qmap': has 0 element(s), but must have 16");
  check_refused(f4, with(good, reshaped(good.require("scale"), DType::F32, 1)), CaseScope::Present, "tensor 'scale'");
  Tensor codes = good.require("codes");
  codes.bytes[5] = 16;  // the 4-bit table has 16 entries
  check_refused(f4, with(good, codes), CaseScope::Present,
                "tensor 'codes': element 5 is code 16, outside table 'qmap' of 16 entries");

  const FormatSpec& adam = *find_format("bnb.adam8bit.cpu");
  const Case state = complete_case(adam);
  check_refused(adam, with(state, reshaped(state.require("exp_avg.qmap"), DType::F32, 0)), CaseScope::Inputs,
                "tensor 'exp_avg.qmap': has 0 element(s), but must have 256");
}

TEST_CASE("an optional input is required when its parameter asks for it") {
  const FormatSpec& f = *find_format("torchao.adam.dense");
  Case c = complete_case(f);
  c.metadata["params"] = R"({"amsgrad":true})";
  check_refused(f, c, CaseScope::Inputs, "tensor 'max_exp_avg_sq': is missing");
  c.metadata["params"] = R"({"bf16_stochastic_round":true})";
  check_refused(f, c, CaseScope::Inputs, "tensor 'sr_random': is missing");
}

TEST_CASE("params must be known, of their default's type, and block sizes whole numbers in range") {
  const FormatSpec& f = *find_format("torchao.codebook8.signed");
  const Case good = complete_case(f);
  struct Bad {
    const char* params;
    const char* words;
  };
  for (const Bad& b : {Bad{R"({"block_sise":256})", "has no parameter 'block_sise' (its parameters: block_size)"},
                       Bad{R"({"block_size":2.5})", "parameter 'block_size' must be an integer (got 2.5)"},
                       Bad{R"({"block_size":"256"})", "parameter 'block_size' must be an integer (got \"256\")"},
                       Bad{R"({"block_size":-1})", "params: block_size must be a whole number from 1 to 2147483647 (got -1)"},
                       Bad{R"({"block_size":0})", "params: block_size must be a whole number from 1 to 2147483647 (got 0)"},
                       Bad{R"({"block_size":18446744073709551615})", "block_size must be"},
                       Bad{R"([1,2])", "metadata 'params' is not a JSON object"}}) {
    Case c = good;
    c.metadata["params"] = b.params;
    check_refused(f, c, CaseScope::Complete, b.words);
  }
  const FormatSpec& adam = *find_format("torchao.adam.fp8");
  Case c = complete_case(adam);
  c.metadata["params"] = R"({"beta1":"0.9"})";
  check_refused(adam, c, CaseScope::Inputs, "parameter 'beta1' must be a finite number");
  c.metadata["params"] = R"({"beta1":1e400})";  // parsed as infinity
  CHECK_THROWS_AS(validate_case(adam, c, CaseScope::Inputs), CaseError);
}

TEST_CASE("a well-formed case the arithmetic cannot take is refused naming the file and format") {
  const FormatSpec& f = *find_format("coat.act.pergroup");
  Case c;
  c.origin = "odd.safetensors";
  c.metadata["format"] = f.name;
  c.add(Tensor::from_f32("input", {3, 5}, std::vector<float>(15, 1.0f)));  // COAT needs multiples of its tiles
  CHECK_THROWS_WITH_AS(run_reference(f, c), doctest::Contains("odd.safetensors: format coat.act.pergroup: "), CaseError);
}

TEST_CASE("the expected case of a comparison must hold tensors") {
  Case empty;
  empty.origin = "empty.safetensors";
  CHECK_THROWS_WITH_AS(compare_cases(empty, empty, TolerancePolicy{}),
                       "empty.safetensors: the expected case holds no tensors: nothing to compare", CaseError);
}

}  // namespace
}  // namespace lowbit
