// The diagnosis' block variants on every format where their bug is possible (issue 28), beyond the
// format whose mutant needed them: for each (format, variant) pair, a wrong kernel's outputs computed
// here from the reference's case by this file's own arithmetic (not the variant's code, not a
// mutant's), which must differ from the reference on the input that shows the bug, and which the
// diagnosis must name with that variant; and the reference's outputs with an unrelated bug (one code
// moved to its neighbour), which it must not.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "lowbit/blockwise.hpp"
#include "lowbit/coat_activation.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/diagnosis.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/fp8.hpp"

using namespace lowbit;

namespace {

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// `e` with its codes and scale replaced, the dequant made by the format's dequantizer and torchao's
// 4-bit codes packed again (first element high).
Case with_state(const FormatSpec& f, const Case& e, const std::vector<std::uint8_t>& codes, const std::vector<float>& scale) {
  Case a = e;
  const Tensor& old = e.require("codes");
  a.add(Tensor::from_bytes("codes", old.dtype, old.shape, codes));
  a.add(Tensor::from_f32("scale", e.require("scale").shape, scale));
  a.add(Tensor::from_f32("dequant", e.require("dequant").shape, f.dequantize(a, resolve_params(f, e.params()))));
  if (const Tensor* packed = e.find("codes_packed"))
    a.add(Tensor::from_bytes("codes_packed", packed->dtype, packed->shape, blockwise::pack_nibbles(codes)));
  return a;
}

// The dequant's values edited one by one.
Case dequant_edited(const Case& e, const std::function<float(float)>& edit) {
  Case a = e;
  std::vector<float> d = e.require("dequant").f32();
  for (float& v : d) v = edit(v);
  a.add(Tensor::from_f32("dequant", e.require("dequant").shape, d));
  return a;
}

// fp8.perblock.e4m3 with each block's absmax from amax_of(block, is the partial tail): scale amax /
// 448, a block of scale 0 all 0x00 (its NaNs 0x7F), else CUDA's satfinite cast of x / scale.
Case perblock_with(const FormatSpec& f, const Case& e,
                   const std::function<float(std::span<const float>, bool tail)>& amax_of) {
  const std::vector<float> x = e.require("input").f32();
  const std::size_t block = positive_size_param(resolve_params(f, e.params()), "block_size");
  std::vector<std::uint8_t> codes(x.size());
  std::vector<float> scale((x.size() + block - 1) / block);
  for (std::size_t b = 0; b < scale.size(); ++b) {
    const std::size_t start = b * block, end = std::min(x.size(), start + block);
    const float s = amax_of(std::span<const float>(x).subspan(start, end - start), end - start < block) / 448.0f;
    scale[b] = s;
    for (std::size_t i = start; i < end; ++i)
      codes[i] = s == 0.0f ? (std::isnan(x[i]) ? 0x7F : 0x00) : fp8::encode_nearest_even<fp8::E4M3FN>(x[i] / s, fp8::cuda_satfinite());
  }
  return with_state(f, e, codes, scale);
}

// max |x| over the block, NaN skipped, from 0
float amax_skipping_nan(std::span<const float> b) {
  float a = 0.0f;
  for (float v : b)
    if (std::fabs(v) > a) a = std::fabs(v);
  return a;
}

// The block-wise format quantized at block size `wide` (the library's default) and stored at the
// case's: each scale the wide block's. torchao's codebook rule (scale max(amax, 1e-12), amax NaN-keeping,
// torchao_search(x / scale)) or its FP8 one (scale / 448, torch's cast).
Case wide_blocks(const FormatSpec& f, const Case& e, std::size_t wide) {
  const std::vector<float> x = e.require("input").f32();
  const std::size_t block = positive_size_param(resolve_params(f, e.params()), "block_size");
  const bool fp8_state = f.name == "torchao.fp8";
  const std::vector<float> q = fp8_state ? std::vector<float>{} : e.require("qmap").f32();
  std::vector<std::uint8_t> codes(x.size());
  std::vector<float> scale(x.size() / block);
  for (std::size_t w = 0; w * wide < x.size(); ++w) {
    float amax = 0.0f;
    for (std::size_t i = w * wide; i < (w + 1) * wide; ++i) amax = std::isnan(x[i]) || std::isnan(amax) ? NAN : std::max(amax, std::fabs(x[i]));
    const float s = fp8_state ? std::max(amax, 1e-12f) / 448.0f : std::max(amax, 1e-12f);
    for (std::size_t i = w * wide; i < (w + 1) * wide; ++i) {
      codes[i] = fp8_state ? fp8::encode_nearest_even<fp8::E4M3FN>(x[i] / s, fp8::torch_eager<fp8::E4M3FN>())
                           : codebook::torchao_search(x[i] / s, q);
      scale[i / block] = s;
    }
  }
  return with_state(f, e, codes, scale);
}

// An unrelated bug: the first code away from zero, NaN and the ends moved to its neighbour (the first
// code where there is none: a case of NaN and Inf blocks).
Case one_code_moved(const FormatSpec& f, const Case& e) {
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  const auto movable = std::find_if(codes.begin(), codes.end(), [](std::uint8_t c) { return (c & 0x7Fu) >= 2 && (c & 0x7Fu) <= 0x7C; });
  *(movable == codes.end() ? codes.begin() : movable) ^= 1u;
  return with_state(f, e, codes, e.require("scale").f32());
}

// COAT's options from a case's params (its own reading: the names of formats_coat_activation.cpp's defaults).
coat_act::Options coat_options(const nlohmann::json& p) {
  coat_act::Options o;
  o.group_size = static_cast<int>(positive_size_param(p, "group_size"));
  o.fp8 = fp8::format_from_param(p.at("fp8").get<std::string>(), "fp8");
  o.scale_dtype = p.value("scale_dtype", "bf16") == "f32" ? coat_act::ScaleDtype::F32 : coat_act::ScaleDtype::BF16;
  o.division = p.at("division") == "ieee" ? coat_act::Division::Ieee : coat_act::Division::DivFull;
  o.casts = p.at("casts") == "gpu" ? coat_act::Casts::Gpu : coat_act::Casts::TritonInterpreter;
  return o;
}

// A scale tensor shaped as `like`: F32 as it is, BF16 as each value's top half (the values are bf16's).
Tensor scales_like(const Tensor& like, const std::vector<float>& s) {
  if (like.dtype == DType::F32) return Tensor::from_f32(like.name, like.shape, s);
  std::vector<std::uint8_t> bytes;
  for (float v : s) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    bytes.push_back(static_cast<std::uint8_t>(u >> 16));
    bytes.push_back(static_cast<std::uint8_t>(u >> 24));
  }
  return Tensor::from_bytes(like.name, like.dtype, like.shape, bytes);
}

using GroupAmax = std::function<float(std::span<const float> group)>;

// COAT's groups along the rows of x (or of x^T: codes_t, scale_t) with another absmax: S = (amax +
// 1e-10) / fp8_max, codes the cast of x / S, the scale stored as the case stores it.
void coat_rows_with(const Case& e, Case& a, const GroupAmax& amax_of, bool transposed) {
  const coat_act::Options o = coat_options(resolve_params(*find_format(e.format()), e.params()));
  const Tensor& input = e.require("input");
  const std::vector<float> x = input.f32();
  const auto m = static_cast<std::size_t>(input.shape[0]), n = static_cast<std::size_t>(input.shape[1]);
  const std::size_t rows = transposed ? n : m, cols = transposed ? m : n, qb = static_cast<std::size_t>(o.group_size);
  const auto at = [&](std::size_t r, std::size_t c) { return transposed ? x[c * n + r] : x[r * n + c]; };
  std::vector<std::uint8_t> codes(rows * cols);
  std::vector<float> scale;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t g = 0; g < cols / qb; ++g) {
      std::vector<float> group;
      for (std::size_t c = g * qb; c < (g + 1) * qb; ++c) group.push_back(at(r, c));
      const float s = coat_act::group_scale(amax_of(group), o);
      for (std::size_t c = g * qb; c < (g + 1) * qb; ++c)
        codes[r * cols + c] = coat_act::cast_fp8(coat_act::div(at(r, c), s, o.division), o.fp8, o.casts);
      scale.push_back(coat_act::stored_scale(s, o.scale_dtype, o.casts));
    }
  const Tensor& old = e.require(transposed ? "codes_t" : "codes");
  a.add(Tensor::from_bytes(old.name, old.dtype, old.shape, codes));
  a.add(scales_like(e.require(transposed ? "scale_t" : "scale"), scale));
}

// coat.act.pergroup.transposed with another absmax on both sides.
Case coat_transposed_with(const Case& e, const GroupAmax& amax_of) {
  Case a = e;
  coat_rows_with(e, a, amax_of, false);
  coat_rows_with(e, a, amax_of, true);
  return a;
}

// coat.act.pergroup.transposed with every code of a group (of x or of x^T) whose every element is a
// zero (of either sign) or NaN, with at least one zero, written 0x00.
Case coat_transposed_zero_groups(const Case& e) {
  const std::size_t qb = positive_size_param(resolve_params(*find_format(e.format()), e.params()), "group_size");
  const Tensor& input = e.require("input");
  const std::vector<float> x = input.f32();
  const auto m = static_cast<std::size_t>(input.shape[0]), n = static_cast<std::size_t>(input.shape[1]);
  Case a = e;
  for (const bool transposed : {false, true}) {
    const std::size_t rows = transposed ? n : m, cols = transposed ? m : n;
    const auto at = [&](std::size_t r, std::size_t c) { return transposed ? x[c * n + r] : x[r * n + c]; };
    const Tensor& old = e.require(transposed ? "codes_t" : "codes");
    std::vector<std::uint8_t> codes = old.bytes;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t g = 0; g < cols / qb; ++g) {
        bool zero = false, other = false;
        for (std::size_t c = g * qb; c < (g + 1) * qb; ++c) {
          zero = zero || at(r, c) == 0.0f;
          other = other || (!std::isnan(at(r, c)) && at(r, c) != 0.0f);
        }
        if (zero && !other)
          for (std::size_t c = g * qb; c < (g + 1) * qb; ++c) codes[r * cols + c] = 0;
      }
    a.add(Tensor::from_bytes(old.name, old.dtype, old.shape, codes));
  }
  return a;
}

// coat.act.pertensor.groupscale with another absmax of its 1 x 16 groups: each group's bf16 scale, the
// tensor scale their max (NaN when one is: torch.max), every code the cast of x / that scale.
Case coat_pertensor_with(const Case& e, const GroupAmax& amax_of) {
  nlohmann::json p = resolve_params(*find_format(e.format()), e.params());
  p["scale_dtype"] = "bf16";
  const coat_act::Options o = coat_options(p);
  const std::vector<float> x = e.require("input").f32();
  std::vector<float> group_scale;
  float tensor_scale = 0.0f;
  for (std::size_t g = 0; g * 16 < x.size(); ++g) {
    const float s = coat_act::stored_scale(coat_act::group_scale(amax_of(std::span<const float>(x).subspan(g * 16, 16)), o),
                                           coat_act::ScaleDtype::BF16, o.casts);
    group_scale.push_back(s);
    tensor_scale = std::isnan(s) || std::isnan(tensor_scale) ? std::numeric_limits<float>::quiet_NaN() : std::max(tensor_scale, s);
  }
  std::vector<std::uint8_t> codes(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) codes[i] = coat_act::cast_fp8(coat_act::div(x[i], tensor_scale, o.division), o.fp8, o.casts);
  Case a = e;
  const Tensor& old = e.require("codes");
  a.add(Tensor::from_bytes(old.name, old.dtype, old.shape, codes));
  a.add(scales_like(e.require("scale"), {tensor_scale}));
  a.add(scales_like(e.require("group_scale"), group_scale));
  return a;
}

// COAT's tl.max (NaN skipped; NaN for a group of NaNs alone), torch.amax's (NaN kept), and one from 0.
float amax_skip_nan(std::span<const float> g) {
  float a = std::numeric_limits<float>::quiet_NaN();
  for (float v : g)
    if (!std::isnan(v) && (std::isnan(a) || std::fabs(v) > a)) a = std::fabs(v);
  return a;
}
float amax_keep_nan(std::span<const float> g) {
  for (float v : g)
    if (std::isnan(v)) return std::numeric_limits<float>::quiet_NaN();
  return amax_skip_nan(g);
}
float amax_misses_last(std::span<const float> g) { return amax_skip_nan(g.first(g.size() - 1)); }
float amax_from_zero(std::span<const float> g) {
  const float a = amax_skip_nan(g);
  return std::isnan(a) ? 0.0f : a;
}

// An unrelated bug for COAT: the first code away from zero, NaN and the ends moved to its neighbour.
Case coat_code_moved(const FormatSpec&, const Case& e) {
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  const auto movable = std::find_if(codes.begin(), codes.end(), [](std::uint8_t c) { return (c & 0x7Fu) >= 2 && (c & 0x7Fu) <= 0x7A; });
  *(movable == codes.end() ? codes.begin() : movable) ^= 1u;
  Case a = e;
  a.add(Tensor::from_bytes("codes", e.require("codes").dtype, e.require("codes").shape, codes));
  return a;
}

struct Pair {
  const char* format;
  const char* variant;
  const char* spec;
  nlohmann::json params;
  std::function<Case(const FormatSpec& f, const Case& e)> wrong;
  std::function<Case(const FormatSpec& f, const Case& e)> unrelated = one_code_moved;
};

}  // namespace

TEST_CASE("the block variants are named on every format where their bug is possible, and only for their bug") {
  const auto nan_positive = [](const FormatSpec&, const Case& e) {
    return dequant_edited(e, [](float v) { return std::isnan(v) ? from_bits(0x7FC00000u) : v; });
  };
  const auto flush_dequant = [](const FormatSpec&, const Case& e) {
    return dequant_edited(e, [](float v) { return std::fabs(v) < FLT_MIN ? std::copysign(0.0f, v) : v; });
  };
  const auto subnormal_zero = [](const FormatSpec& f, const Case& e) {
    return perblock_with(f, e, [](std::span<const float> b, bool) {
      const float a = amax_skipping_nan(b);
      return a < FLT_MIN ? 0.0f : a;
    });
  };
  const auto from_first = [](const FormatSpec& f, const Case& e) {
    return perblock_with(f, e, [](std::span<const float> b, bool) {
      // (C's fmax: which of two NaNs it returns is the build's, so the pair runs at block size 1, where an
      // all-NaN block is one NaN and the fold picks none)
      float a = std::fabs(b[0]);
      for (float v : b.subspan(1)) a = std::fmax(a, std::fabs(v));
      return a;
    });
  };
  const auto tail_short = [](const FormatSpec& f, const Case& e) {
    return perblock_with(f, e, [](std::span<const float> b, bool tail) {
      return amax_skipping_nan(tail && b.size() > 1 ? b.first(b.size() - 1) : b);
    });
  };
  const auto wide = [](std::size_t w) { return [w](const FormatSpec& f, const Case& e) { return wide_blocks(f, e, w); }; };
  const nlohmann::json none = nlohmann::json::object();
  const std::vector<Pair> pairs = {
      {"torchao.codebook8.unsigned", "dequant-nan-positive", "special-blocks", none, nan_positive},
      {"torchao.fp8", "dequant-nan-positive", "special-blocks", none, nan_positive},
      {"fp8.perblock.e4m3", "dequant-nan-positive", "special", none, nan_positive},
      {"fp8.perblock.e4m3", "flush-subnormal-dequant", "tiny-blocks", none, flush_dequant},
      {"fp8.perblock.e4m3", "absmax-subnormal-zero", "tiny-blocks", none, subnormal_zero},
      {"fp8.perblock.e4m3", "absmax-from-first-element", "special", {{"block_size", 1}}, from_first},
      {"fp8.perblock.e4m3", "tail-absmax-short", "special-blocks", none, tail_short},
      {"torchao.codebook8.signed", "block-size-256", "normal:n=4096,seed=5", {{"block_size", 64}}, wide(256)},
      {"torchao.codebook8.unsigned", "block-size-256", "normal:n=4096,seed=5", {{"block_size", 64}}, wide(256)},
      {"torchao.codebook4.signed", "block-size-128", "normal:n=4096,seed=5", {{"block_size", 32}}, wide(128)},
      {"torchao.codebook4.unsigned", "block-size-128", "normal:n=4096,seed=5", {{"block_size", 32}}, wide(128)},
      {"torchao.fp8", "block-size-256", "normal:n=4096,seed=5", {{"block_size", 64}}, wide(256)},
      {"torchao.fp8", "zero-block-codes-zero", "special-blocks", none,
       [](const FormatSpec& f, const Case& e) {
         // every code of a block whose inputs are all +0.0 or -0.0 written 0x00
         std::vector<std::uint8_t> codes = e.require("codes").u8();
         const std::vector<float> x = e.require("input").f32();
         const std::size_t block = positive_size_param(resolve_params(f, e.params()), "block_size");
         for (std::size_t b = 0; b * block < x.size(); ++b)
           if (std::all_of(x.begin() + b * block, x.begin() + (b + 1) * block, [](float v) { return v == 0.0f; }))
             std::fill(codes.begin() + b * block, codes.begin() + (b + 1) * block, std::uint8_t{0});
         return with_state(f, e, codes, e.require("scale").f32());
       }},
      {"coat.act.pertensor.groupscale", "absmax-keeps-nan", "special", none,
       [](const FormatSpec&, const Case& e) { return coat_pertensor_with(e, amax_keep_nan); }, coat_code_moved},
      {"coat.act.pertensor.groupscale", "absmax-from-zero", "special-blocks", none,
       [](const FormatSpec&, const Case& e) { return coat_pertensor_with(e, amax_from_zero); }, coat_code_moved},
      {"coat.act.pergroup.transposed", "absmax-keeps-nan", "special", none,
       [](const FormatSpec&, const Case& e) { return coat_transposed_with(e, amax_keep_nan); }, coat_code_moved},
      {"coat.act.pergroup.transposed", "absmax-from-zero", "special-blocks", none,
       [](const FormatSpec&, const Case& e) { return coat_transposed_with(e, amax_from_zero); }, coat_code_moved},
      {"coat.act.pergroup.transposed", "zero-group-codes-zero", "special-blocks", none,
       [](const FormatSpec&, const Case& e) { return coat_transposed_zero_groups(e); }, coat_code_moved},
      {"coat.act.pertensor.groupscale", "absmax-misses-last", "special-blocks", none,
       [](const FormatSpec&, const Case& e) { return coat_pertensor_with(e, amax_misses_last); }, coat_code_moved},
      {"coat.act.pergroup.transposed", "absmax-misses-last", "special-blocks", none,
       [](const FormatSpec&, const Case& e) { return coat_transposed_with(e, amax_misses_last); }, coat_code_moved},
  };
  for (const Pair& pair : pairs) {
    const std::string format = pair.format, variant = pair.variant;
    CAPTURE(format);
    CAPTURE(variant);
    const FormatSpec& f = *find_format(format);
    std::size_t cases = 0;
    for_each_reference_case(
        f, {pair.spec, resolve_params(f, pair.params)}, 1, {"lowbit test", "test_diagnosis_formats"}, false,
        [&](const std::string&, const Case& e) {
          ++cases;
          const Case wrong = pair.wrong(f, e);
          const Diagnosis d = diagnose(f, {{&e, &wrong}});
          CAPTURE(d.line);
          REQUIRE(d.mismatches > 0);
          CHECK(std::find(d.reproducing.begin(), d.reproducing.end(), variant) != d.reproducing.end());
          const Case unrelated = pair.unrelated(f, e);
          const Diagnosis u = diagnose(f, {{&e, &unrelated}});
          CAPTURE(u.line);
          REQUIRE(u.mismatches > 0);
          CHECK(std::find(u.reproducing.begin(), u.reproducing.end(), variant) == u.reproducing.end());
        },
        [](const std::string&, const std::string&) {});
    CHECK(cases == 1);
  }
}
