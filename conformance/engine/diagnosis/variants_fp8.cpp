// The variants of an FP8 quantizer: the element-wise casts (fp8.<format>.<overflow>), torchao's FP8
// block-wise state (torchao.fp8) and the per-block E4M3 kernel (fp8.perblock.e4m3). Each changes one
// thing of the reference: the rounding rule (ties away from zero, ties toward zero, toward zero, a
// sticky bit one short), the value the cast sees (a subnormal input flushed, double rounding through
// bf16 or f16, x * (1/s) for x / s, an f16 NaN rounded to Inf by a bit trick), the codes written
// (subnormal results flushed, NaN sign or payload), or torchao's block scale
// (amax * (1/448), rounded to bf16, an absmax that skips NaN, no 1e-12 clip, a NaN scale that keeps
// the first NaN element's bits), or the per-block kernel's zero block (-0.0 keeping its sign). The
// casts go through fp8's encode_with, the reference's knob for the rounding predicate
// (docs/formats/fp8.md).
#include <cmath>
#include <limits>

#include "lowbit/bf16_round.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/fp8.hpp"
#include "lowbit/mismatch.hpp"
#include "lowbit/narrow16.hpp"
#include "variants.hpp"

namespace lowbit::diagnosis {

namespace {

using fp8::detail::Truncated;

// StickyShort: a hand-written encoder's sticky mask one bit short, (1 << (shift - 2)) - 1: the bit just
// below the round bit is missed, so a value above a midpoint by that bit alone rounds as a tie (to
// even); at every target (one shift per exponent), or at normal targets only (subnormal ones by
// another path, as encoders that special-case them do).
enum class Rounding { NearestEven, TiesAway, TiesTowardZero, TowardZero, StickyShort, StickyShortNormal };

// Whether the magnitude rounds up, by rule (Truncated: the kept code and the discarded fraction;
// normal_shift: the discarded bits of a normal target, 23 - the format's mantissa bits).
bool rounds_up(const Truncated& t, Rounding r, int normal_shift) {
  if (t.shift >= 64) return false;  // below a quarter of the smallest step
  const std::uint64_t half = std::uint64_t{1} << (t.shift - 1);
  const bool nearest_even = t.rem > half || (t.rem == half && (t.code & 1u));
  switch (r) {
    case Rounding::NearestEven: return nearest_even;
    case Rounding::TiesAway: return t.rem >= half;
    case Rounding::TiesTowardZero: return t.rem > half;
    case Rounding::TowardZero: return false;
    case Rounding::StickyShortNormal:
      if (t.shift != normal_shift) return nearest_even;
      [[fallthrough]];
    case Rounding::StickyShort: {
      const bool sticky = t.shift >= 2 && (t.rem & ((half >> 1) - 1)) != 0;
      return (t.rem & half) && (sticky || (t.code & 1u));
    }
  }
  return false;
}

std::uint8_t encode(fp8::FormatId id, float y, const fp8::Policy& p, Rounding r) {
  return fp8::dispatch(id, [&](auto format) {
    using F = decltype(format);
    return fp8::detail::encode_with<F>(y, p, [r](const Truncated& t) { return rounds_up(t, r, 23 - F::mantissa_bits); });
  });
}

// What one FP8 quantizer of the registry is, for the params of a case.
struct Fp8Quantizer {
  fp8::FormatId id = fp8::FormatId::E4M3FN;
  fp8::Policy policy;
  enum class Kind { Cast, TorchaoState, PerBlock } kind = Kind::Cast;
};

std::optional<Fp8Quantizer> quantizer_of(const FormatSpec& f, const nlohmann::json& p) {
  Fp8Quantizer q;
  const auto nan_of = [&](fp8::FormatId id) -> std::optional<fp8::NanEncoding> {
    if (!p.contains("nan_encoding") || !p.at("nan_encoding").is_string()) return std::nullopt;
    return fp8::parse_nan_encoding(p.at("nan_encoding").get<std::string>(), id);
  };
  if (f.name == "torchao.fp8") {
    q.kind = Fp8Quantizer::Kind::TorchaoState;
    const auto nan = nan_of(q.id);
    const auto overflow = p.value("overflow", "") == "" ? std::nullopt : fp8::parse_overflow(p.at("overflow").get<std::string>());
    if (!nan || !overflow) return std::nullopt;
    q.policy = {*overflow, *nan};
    return q;
  }
  if (f.name == "fp8.perblock.e4m3") {
    q.kind = Fp8Quantizer::Kind::PerBlock;
    q.policy = fp8::cuda_satfinite();
    return q;
  }
  // fp8.<format>.<overflow>
  if (!f.name.starts_with("fp8.") || f.tensor("scale")) return std::nullopt;
  const std::size_t dot = f.name.find('.', 4);
  if (dot == std::string::npos) return std::nullopt;
  const auto id = fp8::parse_format(f.name.substr(4, dot - 4));
  const auto overflow = fp8::parse_overflow(f.name.substr(dot + 1));
  if (!id || !overflow) return std::nullopt;
  const auto nan = nan_of(*id);
  if (!nan) return std::nullopt;
  q.id = *id;
  q.policy = {*overflow, *nan};
  return q;
}

// The value a variant's cast sees instead of the reference's.
enum class Seen { Reference, Reciprocal, FlushedInput, ViaBf16, ViaF16 };

// The codes of the case with each element's code made by the variant (rule, what the cast sees), the
// reference's block scales kept. Where the reference's code is not the cast of a finite scaled value
// (a NaN input or scale, a per-block kernel's zero block) the reference's code is kept: the NaN and
// zero rules are variants of their own.
std::optional<std::vector<std::uint8_t>> recode(const Fp8Quantizer& q, const Case& e, Rounding rule, Seen seen) {
  const Tensor* input = e.find("input");
  const Tensor& ref = e.require("codes");
  if (!input || input->element_count() != ref.bytes.size()) return std::nullopt;
  if ((seen == Seen::ViaBf16 || seen == Seen::ViaF16) && input->dtype != DType::F32) return std::nullopt;
  std::vector<float> scale;
  BlockMap map;
  if (q.kind != Fp8Quantizer::Kind::Cast) {
    scale = e.require("scale").f32();
    map = block_map(e, "codes");
  } else if (seen == Seen::Reciprocal)
    return std::nullopt;  // a cast has no scale
  std::vector<std::uint8_t> codes = ref.u8();
  for (std::size_t i = 0; i < codes.size(); ++i) {
    float x = input->value_as_float(i);
    if (seen == Seen::FlushedInput && is_subnormal_bits(input->dtype, input->bits_at(i))) x = std::copysign(0.0f, x);
    float y = x;
    if (q.kind != Fp8Quantizer::Kind::Cast) {
      const std::size_t b = map.block_of(i);
      if (b >= scale.size()) return std::nullopt;
      const float s = scale[b];
      if (std::isnan(x) || std::isnan(s) || s == 0.0f) continue;
      y = seen == Seen::Reciprocal ? x * (1.0f / s) : x / s;
    }
    if (!std::isnan(y) && seen == Seen::ViaBf16) y = widen_bf16(bf16_round_nearest_even(y));
    if (!std::isnan(y) && seen == Seen::ViaF16) y = widen_f16(f16_round_nearest_even(y));
    codes[i] = encode(q.id, y, q.policy, rule);
  }
  return codes;
}

bool is_nan_code(fp8::FormatId id, std::uint8_t c) {
  return fp8::dispatch(id, [c](auto format) { return decltype(format)::is_nan(c); });
}

using CodeEdit = std::uint8_t (*)(fp8::FormatId id, std::uint8_t c);

// The reference's codes with one rule applied to each code it selects.
std::optional<std::vector<std::uint8_t>> edit_codes(const Fp8Quantizer& q, const Case& e, CodeEdit edit) {
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  for (std::uint8_t& c : codes) c = edit(q.id, c);
  return codes;
}

std::uint8_t flush_subnormal(fp8::FormatId id, std::uint8_t c) {
  const DType d = id == fp8::FormatId::E4M3FN ? DType::F8_E4M3 : DType::F8_E5M2;
  return is_subnormal_bits(d, c) ? static_cast<std::uint8_t>(c & 0x80u) : c;
}
std::uint8_t nan_sign_flipped(fp8::FormatId id, std::uint8_t c) { return is_nan_code(id, c) ? c ^ 0x80u : c; }
std::uint8_t nan_sign_dropped(fp8::FormatId id, std::uint8_t c) { return is_nan_code(id, c) ? c & 0x7Fu : c; }
template <std::uint8_t Magnitude>
std::uint8_t nan_payload(fp8::FormatId id, std::uint8_t c) {
  return is_nan_code(id, c) ? static_cast<std::uint8_t>((c & 0x80u) | Magnitude) : c;
}

// torch's and CUDA's E5M2 NaN S.11111.11 where ml_dtypes writes S.11111.10, and the converse.
std::uint8_t nan_payload_swapped(fp8::FormatId id, std::uint8_t c) {
  if (!is_nan_code(id, c)) return c;
  return static_cast<std::uint8_t>((c & 0x80u) | ((c & 0x7Fu) == 0x7Fu ? 0x7Eu : 0x7Fu));
}

// An f16 input cast to E5M2 by the bit trick (h + 0x7F + lsb) >> 8 on its magnitude, the NaN test made
// on the result: an f16 NaN whose payload lies in the 8 dropped bits (magnitude 0x7C01 to 0x7C80)
// rounds down to the Inf pattern, and is coded as the policy codes an Inf of its sign; every other
// element the reference's (the trick is the cast on every number).
std::optional<std::vector<std::uint8_t>> f16_nan_rounded_to_inf(const Fp8Quantizer& q, const Case& e) {
  const Tensor* input = e.find("input");
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  if (q.kind != Fp8Quantizer::Kind::Cast || q.id != fp8::FormatId::E5M2 || !input || input->dtype != DType::F16 ||
      input->element_count() != codes.size())
    return std::nullopt;
  const float inf = std::numeric_limits<float>::infinity();
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const std::uint64_t h = input->bits_at(i);
    const std::uint64_t magnitude = h & 0x7FFFu;
    if (magnitude > 0x7C00u && magnitude <= 0x7C80u)
      codes[i] = encode(q.id, (h & 0x8000u) ? -inf : inf, q.policy, Rounding::NearestEven);
  }
  return codes;
}

// torchao.fp8's block scale, another way: from the block's values, what the kernel divides by.
using ScaleOf = float (*)(std::span<const float> block);
constexpr float kE4M3Max = 448.0f;
float torch_amax(std::span<const float> block, bool keep_nan) {
  float amax = 0.0f;
  for (float v : block) {
    if (std::isnan(v)) {
      if (keep_nan) return float_from_bits(0x7FC00000u);  // torch.amax's canonical NaN
      continue;
    }
    amax = std::max(amax, std::fabs(v));
  }
  return amax;
}
float clipped(float amax) { return std::isnan(amax) ? amax : std::max(amax, 1e-12f); }
float scale_times_reciprocal(std::span<const float> b) { return clipped(torch_amax(b, true)) * (1.0f / kE4M3Max); }
float scale_in_bf16(std::span<const float> b) {
  return widen_bf16(bf16_round_nearest_even_c10(clipped(torch_amax(b, true)) / kE4M3Max));
}
// C's fmax, as a CPU kernel writes the reduction: a quiet NaN operand is skipped (a signalling one
// gives NaN, glibc's fmax on x86)
float scale_ignoring_nan(std::span<const float> b) {
  float amax = 0.0f;
  for (float v : b) amax = std::fmax(amax, std::fabs(v));
  return clipped(amax) / kE4M3Max;
}
float scale_without_clip(std::span<const float> b) { return torch_amax(b, true) / kE4M3Max; }
// torchao.fp8 storing a NaN block scale with the bits of the block's first NaN element (an amax that
// returns the NaN it meets, whose sign and payload / 448 keeps) where torch.amax gives its canonical
// 0x7FC00000; the codes and dequant the reference's (the scale's NaN bits are the only difference).
std::optional<Case> nan_scale_from_element(const FormatSpec& f, const Case& e, const nlohmann::json& p) {
  const Tensor* input = e.find("input");
  if (!input || input->dtype != DType::F32) return std::nullopt;
  const std::vector<float> x = input->f32();
  std::vector<float> scale = e.require("scale").f32();
  const BlockMap map = block_map(e, "codes");
  std::vector<bool> found(scale.size(), false);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t b = map.block_of(i);
    if (b >= scale.size()) return std::nullopt;
    if (std::isnan(scale[b]) && std::isnan(x[i]) && !found[b]) {
      scale[b] = x[i] / kE4M3Max;
      found[b] = true;
    }
  }
  return with_codes(f, e, p, e.require("codes").u8(), std::move(scale), true);
}

// fp8.perblock.e4m3 with -0.0 in a block of scale 0 coded as its own cast, 0x80 (the sign kept), where
// the format writes 0x00 for every element of such a block
std::optional<Case> zero_block_keeping_sign(const FormatSpec& f, const Case& e, const nlohmann::json& p) {
  const Tensor* input = e.find("input");
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  if (!input || input->dtype != DType::F32 || input->element_count() != codes.size()) return std::nullopt;
  const std::vector<float> x = input->f32(), scale = e.require("scale").f32();
  const BlockMap map = block_map(e, "codes");
  for (std::size_t i = 0; i < codes.size(); ++i) {
    if (map.block_of(i) >= scale.size()) return std::nullopt;
    if (scale[map.block_of(i)] == 0.0f && bits_of(x[i]) == 0x80000000u) codes[i] = 0x80;
  }
  return with_codes(f, e, p, std::move(codes));
}

// torchao.fp8 with every code of a block of zeros alone written 0x00 (fp8.perblock.e4m3's rule for a
// zero block), where torchao divides by its 1e-12 floor and -0.0 keeps its sign (0x80)
std::optional<Case> zero_block_coded_zero(const FormatSpec& f, const Case& e, const nlohmann::json& p) {
  const Tensor* input = e.find("input");
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  if (!input || input->dtype != DType::F32 || input->element_count() != codes.size()) return std::nullopt;
  const std::vector<float> x = input->f32();
  const BlockMap map = block_map(e, "codes");
  std::vector<bool> zeros(map.blocks, true);
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i] != 0.0f) zeros.at(map.block_of(i)) = false;  // (NaN too)
  for (std::size_t i = 0; i < codes.size(); ++i)
    if (zeros[map.block_of(i)]) codes[i] = 0x00;
  return with_codes(f, e, p, std::move(codes));
}

// fp8.perblock.e4m3 coding a block again from another absmax, by the format's rule: scale amax / 448, a
// block of scale 0 coded 0x00 (NaN elements 0x7F), else CUDA's satfinite cast of x / scale
float perblock_requantized(std::span<const float> block, float absmax, std::span<std::uint8_t> codes) {
  const float scale = absmax / kE4M3Max;
  for (std::size_t i = 0; i < block.size(); ++i)
    codes[i] = scale == 0.0f ? (std::isnan(block[i]) ? fp8::E4M3FN::quiet_nan : std::uint8_t{0})
                             : fp8::encode_nearest_even<fp8::E4M3FN>(block[i] / scale, fp8::cuda_satfinite());
  return scale;
}

}  // namespace

void add_fp8_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  if (!quantizer_of(f, resolve_params(f, {}))) return;
  const FormatSpec* spec = &f;
  const auto element = [&](std::string name, std::string description, Rounding rule, Seen seen) {
    out.push_back({std::move(name), std::move(description),
                   [spec, rule, seen](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                     const auto q = quantizer_of(*spec, p);
                     if (!q) return std::nullopt;
                     auto codes = recode(*q, e, rule, seen);
                     if (!codes) return std::nullopt;
                     return with_codes(*spec, e, p, std::move(*codes));
                   }});
  };
  const auto edited = [&](std::string name, std::string description, CodeEdit edit, bool nan_only) {
    out.push_back({std::move(name), std::move(description),
                   [spec, edit, nan_only](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                     const auto q = quantizer_of(*spec, p);
                     if (!q) return std::nullopt;
                     // a NaN code's dequantized value is NaN either way: the reference's is kept
                     return with_codes(*spec, e, p, *edit_codes(*q, e, edit), std::nullopt, nan_only);
                   }});
  };
  const bool scaled = f.tensor("scale") != nullptr;
  if (scaled) element("reciprocal", "the reference with x * (1 / s) for x / s", Rounding::NearestEven, Seen::Reciprocal);
  element("ties-away", "the reference with ties away from zero", Rounding::TiesAway, Seen::Reference);
  element("ties-toward-zero", "the reference with ties toward zero", Rounding::TiesTowardZero, Seen::Reference);
  element("toward-zero", "the reference rounding toward zero (truncation)", Rounding::TowardZero, Seen::Reference);
  element("sticky-bit-one-short", "the reference with a sticky bit that misses the bit just below the round bit",
          Rounding::StickyShort, Seen::Reference);
  element("sticky-bit-one-short-normal",
          "the reference with a sticky bit that misses the bit just below the round bit, at normal targets only",
          Rounding::StickyShortNormal, Seen::Reference);
  element("flush-subnormal-inputs", "the reference with subnormal inputs taken as zero", Rounding::NearestEven,
          Seen::FlushedInput);
  edited("flush-subnormal-outputs", "the reference with subnormal codes flushed to zero", flush_subnormal, false);
  element("double-rounding-bf16", "the reference rounding through bfloat16 first", Rounding::NearestEven, Seen::ViaBf16);
  element("double-rounding-f16", "the reference rounding through float16 first", Rounding::NearestEven, Seen::ViaF16);
  edited("nan-sign-flipped", "the reference with the sign of every NaN code flipped", nan_sign_flipped, true);
  edited("nan-sign-dropped", "the reference with every NaN code positive", nan_sign_dropped, true);
  if (quantizer_of(f, resolve_params(f, {}))->id == fp8::FormatId::E5M2 && !scaled)
    out.push_back({"f16-nan-rounded-to-inf",
                   "the reference with an f16 NaN whose payload lies in the 8 bits E5M2 drops cast as Inf (the bit "
                   "trick (h + 0x7F + lsb) >> 8 with the NaN test after it)",
                   [spec](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                     const auto q = quantizer_of(*spec, p);
                     if (!q) return std::nullopt;
                     auto codes = f16_nan_rounded_to_inf(*q, e);
                     if (!codes) return std::nullopt;
                     return with_codes(*spec, e, p, std::move(*codes));
                   }});
  if (quantizer_of(f, resolve_params(f, {}))->id == fp8::FormatId::E5M2) {
    edited("nan-payload-11", "the reference with NaN codes S.11111.11 (torch's and CUDA's)", nan_payload<0x7F>, true);
    edited("nan-payload-10", "the reference with NaN codes S.11111.10 (ml_dtypes')", nan_payload<0x7E>, true);
    edited("nan-payload-other-library", "the reference with the other library's NaN payload (S.11111.11 and S.11111.10 swapped)",
           nan_payload_swapped, true);
  }
  if (f.name == "fp8.perblock.e4m3") {
    out.push_back({"zero-block-keeps-sign", "the reference with -0.0 in an all-zero block (scale 0) coded 0x80, not 0x00",
                   [spec](const Case& e, const nlohmann::json& p) { return zero_block_keeping_sign(*spec, e, p); }});
    // its absmax is max |x| from 0 with NaN ignored over blocks with a partial tail, as bitsandbytes'
    // CPU one; its scale amax / 448 can be subnormal, and so can q * scale; a block holding an Inf has
    // scale Inf, and its zero codes dequantize to 0 * Inf, x86's default NaN 0xFFC00000
    add_absmax_slips(f, out, [](const Case&, const nlohmann::json&) -> BlockRequantizer { return perblock_requantized; });
    add_dequant_slips(out, true, true);
  }
  if (f.name != "torchao.fp8") return;
  const auto scale = [&](std::string name, std::string description, ScaleOf scale_of) {
    out.push_back({std::move(name), std::move(description),
                   [spec, scale_of](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                     const auto q = quantizer_of(*spec, p);
                     if (!q) return std::nullopt;
                     return requantized(*spec, e, p, scale_of, [&](float x, float s) {
                       return encode(q->id, x / s, q->policy, Rounding::NearestEven);
                     });
                   }});
  };
  scale("scale-reciprocal", "the reference with the block scale amax * (1 / 448) for amax / 448", scale_times_reciprocal);
  scale("scale-bf16", "the reference with the block scale rounded to bfloat16", scale_in_bf16);
  scale("absmax-ignores-nan", "the reference with a block absmax that skips NaN (fmax)", scale_ignoring_nan);
  scale("scale-without-clip", "the reference without the 1e-12 floor of the block absmax", scale_without_clip);
  out.push_back({"nan-scale-from-element", "the reference storing a NaN block scale with the first NaN element's sign and payload",
                 [spec](const Case& e, const nlohmann::json& p) { return nan_scale_from_element(*spec, e, p); }});
  out.push_back({"zero-block-codes-zero",
                 "the reference with every code of a block of zeros written 0x00 (fp8.perblock.e4m3's rule), where "
                 "torchao divides by its 1e-12 floor and -0.0 keeps its sign (0x80)",
                 [spec](const Case& e, const nlohmann::json& p) { return zero_block_coded_zero(*spec, e, p); }});
  // AdamFp8's block_size keyword (256) hard-coded; the dequant's NaN (a negative NaN code's, widened
  // with its sign) written as +NaN. Its scale is at least 1e-12 / 448 and E4M3's smallest magnitude
  // 2^-9: q * scale is never subnormal
  add_default_block_size(f, out, "torchao's optimizer default, torchao 0.18 optim/adam.py");
  add_dequant_slips(out, false, true);
}

}  // namespace lowbit::diagnosis
