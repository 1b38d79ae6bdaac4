// The variants of a block-wise quantizer that do not depend on how an element is coded, written once
// for every block format where the slip is possible: the block absmax's slips (a subnormal absmax taken
// as 0, a fold started from the first |x|, a partial last block read one element short), a block size
// hard-coded to the library's default, and the dequantized values' slips (a subnormal flushed, a NaN
// written as +NaN). Each format says how it codes a block again (variants_bnb.cpp, variants_fp8.cpp);
// docs/verifying-a-kernel.md, "The diagnosis", lists the formats each one applies to and why.
#include <cmath>
#include <memory>

#include "lowbit/float_bits.hpp"
#include "variants.hpp"

namespace lowbit::diagnosis {

namespace {

// The absmax a slip gives a block of the case (its F32 inputs, whether it is a partial last block, and
// the reference's absmax of it: max |x| from 0, NaN ignored).
using AbsmaxRule = std::function<float(std::span<const float> block, bool tail, float reference)>;

// The case with each block whose slipped absmax differs (in bits) from the reference's coded again by
// the format's requantizer; the other blocks keep the reference's codes and scale. nullopt for another
// input dtype or layout, or where the format has no requantizer for the case.
std::optional<Case> with_absmax(const FormatSpec& f, const Case& e, const nlohmann::json& p, const AbsmaxRule& rule,
                                const BlockRequantizerOf& requantizer_of) {
  const Tensor* input = e.find("input");
  if (!input || input->dtype != DType::F32) return std::nullopt;
  const std::vector<float> x = input->f32();
  const std::size_t block = positive_size_param(p, "block_size");
  std::vector<float> scale = e.require("scale").f32();
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  if (scale.size() != (x.size() + block - 1) / block || codes.size() != x.size()) return std::nullopt;
  std::optional<BlockRequantizer> requantize;  // made for the first block that needs it (a table, for bitsandbytes)
  for (std::size_t b = 0; b < scale.size(); ++b) {
    const std::size_t start = b * block, end = std::min(x.size(), start + block);
    const std::span<const float> values = std::span<const float>(x).subspan(start, end - start);
    float reference = 0.0f;  // the formats' own fold: std::max from 0 keeps the running value over a NaN
    for (float v : values) reference = std::max(reference, std::fabs(v));
    const float a = rule(values, end - start < block, reference);
    if (bits_of(a) == bits_of(reference)) continue;
    if (!requantize) requantize = requantizer_of(e, p);
    if (!*requantize) return std::nullopt;
    scale[b] = (*requantize)(values, a, std::span<std::uint8_t>(codes).subspan(start, end - start));
  }
  return with_codes(f, e, p, std::move(codes), std::move(scale));
}

// The case's dequant with each element's value edited (F32 dequant only); codes and scale are the reference's.
std::optional<Case> dequant_edited(const Case& e, const std::function<float(float)>& edit) {
  const Tensor* dequant = e.find("dequant");
  if (!dequant || dequant->dtype != DType::F32) return std::nullopt;
  std::vector<float> d = dequant->f32();
  for (float& v : d) v = edit(v);
  return with_outputs(e, {Tensor::from_f32("dequant", dequant->shape, d)});
}

}  // namespace

void add_absmax_slips(const FormatSpec& f, std::vector<KnownVariant>& out, BlockRequantizerOf requantizer_of) {
  const FormatSpec* spec = &f;
  const auto slip = [&](std::string name, std::string description, AbsmaxRule rule) {
    out.push_back({std::move(name), std::move(description),
                   [spec, rule = std::move(rule), requantizer_of](const Case& e, const nlohmann::json& p) {
                     return with_absmax(*spec, e, p, rule, requantizer_of);
                   }});
  };
  // a kernel under flush-to-zero, or one that tests absmax < FLT_MIN for "empty": the block quantized
  // as a zero block where the format divides by it
  slip("absmax-subnormal-zero", "the reference with a subnormal block absmax taken as 0 (the block coded as a zero block)",
       [](std::span<const float>, bool, float reference) {
         return std::fpclassify(reference) == FP_SUBNORMAL ? 0.0f : reference;
       });
  // fmaxf folded from the first element: NaN is skipped from the second on, so only a block of NaNs
  // alone keeps one (its scale NaN), where the format starts from 0
  slip("absmax-from-first-element",
       "the reference with the block absmax folded from its first |x| (fmax) instead of from 0: an all-NaN block's absmax NaN",
       [](std::span<const float> block, bool, float) {
         float a = std::fabs(block[0]);
         for (float v : block.subspan(1)) a = std::fmax(a, std::fabs(v));
         return a;
       });
  // a loop bound of the tail's length minus one (the full blocks are right)
  slip("tail-absmax-short", "the reference with a partial last block's absmax taken without its last element",
       [](std::span<const float> block, bool tail, float reference) {
         if (!tail || block.size() < 2) return reference;
         float a = 0.0f;  // the format's own fold (max from 0, NaN ignored) over one element fewer
         for (float v : block.first(block.size() - 1)) a = std::fmax(a, std::fabs(v));
         return a;
       });
}

void add_default_block_size(const FormatSpec& f, std::vector<KnownVariant>& out, const std::string& library_default) {
  const std::size_t wide_block = positive_size_param(f.default_params, "block_size");
  const FormatSpec* spec = &f;
  // a kernel written for the library's default: the reference at the default block size, each stored
  // scale the one of the wide block that holds its block's first element, each dequantized value the
  // wide run's (the same as from the stored scales where the case's block size divides the default)
  out.push_back({"block-size-" + std::to_string(wide_block),
                 "the reference in blocks of " + std::to_string(wide_block) + " (" + library_default + ") whatever block_size says",
                 [spec, wide_block](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                   const std::size_t block = positive_size_param(p, "block_size");
                   if (block >= wide_block) return std::nullopt;
                   nlohmann::json wide = p;
                   wide["block_size"] = wide_block;
                   const Case run = with_outputs(e, spec->run(e, wide, 1));  // a whole-block format: throws, not applicable
                   const std::vector<float> wide_scale = run.require("scale").f32();
                   std::vector<float> scale(e.require("scale").element_count());
                   for (std::size_t s = 0; s < scale.size(); ++s) {
                     const std::size_t w = s * block / wide_block;
                     if (w >= wide_scale.size()) return std::nullopt;
                     scale[s] = wide_scale[w];
                   }
                   std::optional<Case> made = with_codes(*spec, e, p, run.require("codes").u8(), std::move(scale), true);
                   if (made && e.find("dequant")) made->add(run.require("dequant"));
                   return made;
                 }});
}

void add_dequant_slips(std::vector<KnownVariant>& out, bool subnormal_products, bool other_nans) {
  // q[code] * scale under flush-to-zero: a subnormal product becomes a zero of its sign
  if (subnormal_products)
    out.push_back({"flush-subnormal-dequant", "the reference with subnormal dequantized values flushed to zero",
                   [](const Case& e, const nlohmann::json&) -> std::optional<Case> {
                     const Tensor* dequant = e.find("dequant");
                     if (!dequant) return std::nullopt;
                     return with_outputs(e, {with_subnormals_flushed(*dequant)});
                   }});
  // A NaN dequantized value (a NaN code's, or 0 * Inf) written as the C/C++ NAN,
  // std::numeric_limits<float>::quiet_NaN(), 0x7FC00000, where x86's multiply gives the NaN operand's
  // bits or its default NaN 0xFFC00000
  if (other_nans)
    out.push_back({"dequant-nan-positive", "the reference with a NaN dequantized value written as +NaN (0x7FC00000)",
                 [](const Case& e, const nlohmann::json&) {
                   return dequant_edited(e, [](float v) { return std::isnan(v) ? float_from_bits(0x7FC00000u) : v; });
                 }});
}

}  // namespace lowbit::diagnosis
