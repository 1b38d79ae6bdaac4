// Registry entries of the element-wise FP8 casts: fp8.<format>.<overflow policy>.
#include <cmath>
#include <limits>

#include "fp8_edges.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/fp8_cast.hpp"
#include "lowbit/fp8.hpp"

namespace lowbit {

namespace {

using fp8::FormatId;
using fp8::Overflow;

fp8::NanEncoding nan_encoding_from(const std::string& name, FormatId f) {
  if (const auto e = fp8::parse_nan_encoding(name, f)) return *e;
  throw std::runtime_error("nan_encoding must be torch, cuda or ml_dtypes (got '" + name + "')");
}

// The decoding of NaN codes in `dequant` (absent in cases made before the parameter: quiet).
fp8::NanWidening nan_widening_from(const nlohmann::json& params) {
  const std::string name = params.contains("nan_widening") ? params.at("nan_widening").get<std::string>() : "quiet";
  if (const auto w = fp8::parse_nan_widening(name)) return *w;
  throw std::runtime_error("nan_widening must be quiet or c10 (got '" + name + "')");
}

std::vector<float> input_as_f32(const Tensor& t) {
  std::vector<float> out(t.element_count());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = t.value_as_float(i);
  return out;
}

template <class Format>
std::vector<Tensor> run_cast(const Case& in, const nlohmann::json& params, Overflow overflow, int threads) {
  const fp8::Policy policy{overflow, nan_encoding_from(params.at("nan_encoding").get<std::string>(), Format::id)};
  const fp8::NanWidening widening = nan_widening_from(params);
  const Tensor& input = in.require("input");
  const std::vector<float> x = input_as_f32(input);  // widening bf16 and f16 is exact
  std::vector<std::uint8_t> codes(x.size());
  std::vector<float> dequant(x.size());
  // the fast cast: fp8::encode_nearest_even's bytes on every input (fp8_cast.hpp)
  fp8::encode_array(Format::id, x, codes, policy, worth_threads(x.size(), threads));
  for (std::size_t i = 0; i < x.size(); ++i) dequant[i] = fp8::decode<Format>(codes[i], widening);
  return {Tensor::from_bytes("codes", Format::code_dtype, input.shape, codes), Tensor::from_f32("dequant", input.shape, dequant)};
}

// codes and dequant: element i is the cast of input i. A zero where the expected code is a subnormal
// that rounding could not reach (flushed_alone; the dequant tensor's view of a flushed code too), or,
// once the tensor shows such a flush, any zero for a subnormal, or a zero where the input is a
// subnormal of its dtype, is a flush; neighbouring codes are a tie or near the boundary; the input is
// recorded (a cast has no scale: the value it rounds is the input itself). A class names a cause only
// where it alone explains the element, or where the kernel's unambiguous elements show that cause
// (formats_codebook.cpp, Evidence).
template <class Format>
ElementExplainer cast_explainer(const Case& expected, const Case& actual, const std::string& tensor) {
  const Tensor* want = expected.find("codes");
  const Tensor* got = actual.find("codes");
  const Tensor* input = expected.find("input");
  if ((tensor != "codes" && tensor != "dequant") || !want || !got || !input || got->bytes.size() != want->bytes.size())
    return {};
  // whether some zero of the tensor is a flush that no rounding reaches
  bool flush_seen = false;
  for (std::size_t i = 0; i < want->bytes.size() && i < input->element_count() && !flush_seen; ++i) {
    const std::uint8_t e = want->bytes[i], a = got->bytes[i];
    flush_seen = e != a && !Format::is_nan(e) && !Format::is_inf(e) &&
                 flushed_alone(Format::code_dtype, e, a, fp8::decode<Format>(e), input->value_as_float(i));
  }
  return [want, got, input, flush_seen](std::size_t i) -> Explanation {
    Explanation why;
    if (i >= want->bytes.size() || i >= input->element_count()) return why;
    const float x = input->value_as_float(i);
    why.input = x;
    const std::uint8_t e = want->bytes[i], a = got->bytes[i];
    if (Format::is_nan(e) || Format::is_nan(a) || Format::is_inf(e) || Format::is_inf(a)) return why;
    const bool actual_zero = is_zero_bits(Format::code_dtype, a);
    if (flushed_alone(Format::code_dtype, e, a, fp8::decode<Format>(e), x) ||
        (flush_seen && actual_zero && is_subnormal_bits(Format::code_dtype, e)) ||
        (actual_zero && !is_zero_bits(Format::code_dtype, e) && is_subnormal_bits(input->dtype, input->bits_at(i)))) {
      why.cls = MismatchClass::FlushedSubnormal;
      return why;
    }
    if (std::abs(fp8::code_ordinal(e) - fp8::code_ordinal(a)) != 1) return why;
    const double ve = fp8::decode<Format>(e), va = fp8::decode<Format>(a);
    Explanation n = explain_neighbours(x, std::min(ve, va), std::max(ve, va));
    n.input = x;
    n.scaled.reset();
    return n;
  };
}

template <class Format>
std::vector<float> fp8_edge_inputs(const nlohmann::json&) {
  std::vector<float> v;
  const float inf = std::numeric_limits<float>::infinity();
  auto around = [&](float x) {
    v.push_back(std::nextafter(x, -inf));
    v.push_back(x);
    v.push_back(std::nextafter(x, inf));
  };
  for (unsigned c = 0; c <= Format::max_finite; ++c) {
    const float value = fp8::decode<Format>(static_cast<std::uint8_t>(c));
    const float next = c < Format::max_finite ? fp8::decode<Format>(static_cast<std::uint8_t>(c + 1))
                                              : value + (value - fp8::decode<Format>(static_cast<std::uint8_t>(c - 1)));
    v.push_back(value);
    around(static_cast<float>((double(value) + double(next)) / 2));  // midpoint (exact in float32 here) and its neighbours
  }
  const std::size_t positives = v.size();
  for (std::size_t k = 0; k < positives; ++k) v.push_back(-v[k]);
  for (float x : {-0.0f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(), 1e-30f, 1e30f,
                  std::numeric_limits<float>::max(), inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                  -std::numeric_limits<float>::quiet_NaN()})
    v.push_back(x);
  return v;
}

template <class Format>
FormatSpec cast_format(Overflow overflow, std::string provenance) {
  FormatSpec f;
  f.name = "fp8." + std::string(Format::name) + "." + std::string(fp8::overflow_name(overflow));
  f.description = "element-wise cast of input (F32, BF16 or F16) to " + std::string(Format::name) +
                  ", round to nearest even, overflow policy " + std::string(fp8::overflow_name(overflow)) +
                  "; codes and their decoded values";
  f.provenance = std::move(provenance);
  // nan_widening: how `dequant` holds a NaN code (torch's casts: c10; ml_dtypes: quiet).
  f.default_params = {{"nan_encoding", fp8::default_nan_encoding(overflow)}, {"nan_widening", "quiet"}};
  f.inputs = {{"input", {.dtypes = {DType::F32, DType::BF16, DType::F16}}}};
  f.outputs = {{"codes", {.dtypes = {Format::code_dtype}, .shape = same_shape("input")}},
               {"dequant", {.dtypes = {DType::F32}, .shape = same_shape("input")}}};
  f.run = [overflow](const Case& in, const nlohmann::json& p, int threads) { return run_cast<Format>(in, p, overflow, threads); };
  f.explain = cast_explainer<Format>;
  f.edge_inputs = fp8_edge_inputs<Format>;
  f.dequantize_reads = {"codes"};
  f.dequantize = [](const Case& c, const nlohmann::json& p) {
    const fp8::NanWidening widening = nan_widening_from(p);
    std::vector<float> out;
    for (std::uint8_t code : c.require("codes").u8()) out.push_back(fp8::decode<Format>(code, widening));
    return out;
  };
  return f;
}

}  // namespace

std::vector<float> fp8_grid_edges(fp8::FormatId id) {
  return fp8::dispatch(id, [](auto format) { return fp8_edge_inputs<decltype(format)>(nlohmann::json::object()); });
}

void register_fp8_formats(std::vector<FormatSpec>& out) {
  const std::string cuda = "CUDA 12/13 cuda_fp8.hpp __nv_cvt_float_to_fp8(__NV_SATFINITE), cvt.rn.satfinite; Triton casts";
  out.push_back(cast_format<fp8::E4M3FN>(
      Overflow::SatFinite, cuda + "; torch >= 2.13 Float8_e4m3fn.h fp8e4m3fn_from_fp32_value with nan_encoding=torch"));
  const std::string nosat = "CUDA 12/13 cuda_fp8.hpp __nv_cvt_float_to_fp8(__NV_NOSAT) with nan_encoding=cuda";
  out.push_back(cast_format<fp8::E4M3FN>(
      Overflow::NaN, "torch <= 2.12 c10 Float8_e4m3fn.h fp8e4m3fn_from_fp32_value; ml_dtypes float8.h; " + nosat));
  out.push_back(cast_format<fp8::E4M3FN>(Overflow::Inf, "OCP OFP8 rev 1.0 non-saturating (E4M3FN has no Inf: NaN)"));
  out.push_back(cast_format<fp8::E5M2>(Overflow::SatFinite, cuda));
  out.push_back(cast_format<fp8::E5M2>(Overflow::NaN, "lowbit: E5M2 with NaN on finite overflow (no known producer; for kernels that do so)"));
  out.push_back(cast_format<fp8::E5M2>(
      Overflow::Inf, "torch c10 Float8_e5m2.h fp8e5m2_from_fp32_value; ml_dtypes float8.h; OCP non-saturating; " + nosat));
}

}  // namespace lowbit
