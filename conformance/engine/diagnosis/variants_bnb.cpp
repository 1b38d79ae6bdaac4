// The block-level variants of bitsandbytes' block-wise quantizer (bnb.blockwise8.*): what a kernel of
// the CPU back end does differently with a whole block rather than with one element. Its block absmax
// (a subnormal one taken as 0, a fold started from the first |x|, a partial last block read one
// element short), its block size (4096 whatever block_size says), and its dequantized values (a
// subnormal flushed, a NaN written as +NaN). The element variants (the search, the table, the
// normalization) are variants_codebook.cpp's; the other back ends, variants_params.cpp's.
#include <cmath>
#include <cstring>

#include "lowbit/codebook.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/mismatch.hpp"
#include "variants.hpp"

namespace lowbit::diagnosis {

Tensor with_subnormals_flushed(const Tensor& t) {
  Tensor out = t;
  const std::size_t n = t.element_count(), size = n ? t.bytes.size() / n : 0;
  if (size == 0) return out;
  for (std::size_t i = 0; i < n; ++i) {
    if (!is_subnormal_bits(t.dtype, t.bits_at(i))) continue;
    // a zero of the element's sign: every byte 0 but the sign bit, the top bit of its last byte
    std::uint8_t* e = out.bytes.data() + i * size;
    std::memset(e, 0, size - 1);
    e[size - 1] &= 0x80u;
  }
  return out;
}

namespace {

// The absmax a variant gives a block of the case (its F32 inputs, whether it is a partial last block,
// and the reference's absmax of it: max |x| from 0, NaN ignored).
using AbsmaxRule = std::function<float(std::span<const float> block, bool tail, float reference)>;

// bitsandbytes' CPU back end with another block absmax: absmax 0 gives codes 0, another the table's code
// of x * (1 / absmax); the blocks whose absmax is the reference's keep their codes. nullopt for another
// back end, dtype or qmap.
std::optional<Case> cpu_with_absmax(const FormatSpec& f, const Case& e, const nlohmann::json& p, const AbsmaxRule& rule) {
  const Tensor* input = e.find("input");
  const Tensor* qmap = e.find("qmap");
  if (p.value("backend", "") != "cpu" || !input || input->dtype != DType::F32 || !qmap || qmap->dtype != DType::F32 ||
      qmap->element_count() != 256)
    return std::nullopt;
  const std::vector<float> x = input->f32();
  const std::size_t block = positive_size_param(p, "block_size");
  std::vector<float> scale = e.require("scale").f32();
  if (scale.size() != (x.size() + block - 1) / block) return std::nullopt;
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  if (codes.size() != x.size()) return std::nullopt;
  std::optional<codebook::BnbCpuLut> lut;  // built for the first block that needs it
  for (std::size_t b = 0; b < scale.size(); ++b) {
    const std::size_t start = b * block, end = std::min(x.size(), start + block);
    const float a = rule(std::span<const float>(x).subspan(start, end - start), end - start < block, scale[b]);
    if (bits_of(a) == bits_of(scale[b])) continue;
    scale[b] = a;
    if (a != 0.0f && !lut) lut.emplace(qmap->f32());
    for (std::size_t i = start; i < end; ++i) codes[i] = a == 0.0f ? 0 : (*lut)(x[i] * (1.0f / a));
  }
  return with_codes(f, e, p, std::move(codes), std::move(scale));
}

// The case's dequant with each element's bits edited (F32 dequant only); codes and scale are the reference's.
std::optional<Case> dequant_edited(const Case& e, const std::function<float(float)>& edit) {
  const Tensor* dequant = e.find("dequant");
  if (!dequant || dequant->dtype != DType::F32) return std::nullopt;
  std::vector<float> d = dequant->f32();
  for (float& v : d) v = edit(v);
  return with_outputs(e, {Tensor::from_f32("dequant", dequant->shape, d)});
}

constexpr std::size_t kDefaultBlock = 4096;  // quantize_blockwise's default blocksize (bitsandbytes functional.py)

}  // namespace

void add_bnb_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  if (!f.name.starts_with("bnb.blockwise8.")) return;
  const FormatSpec* spec = &f;
  const auto absmax = [&](std::string name, std::string description, AbsmaxRule rule) {
    out.push_back({std::move(name), std::move(description),
                   [spec, rule = std::move(rule)](const Case& e, const nlohmann::json& p) {
                     return cpu_with_absmax(*spec, e, p, rule);
                   }});
  };
  // a kernel under flush-to-zero, or one that tests absmax < FLT_MIN for "empty": the block quantized
  // as a zero block where bitsandbytes divides by it (1 / absmax may be Inf: the table's ends)
  absmax("absmax-subnormal-zero", "the reference with a subnormal block absmax taken as 0 (codes 0, scale 0)",
         [](std::span<const float>, bool, float reference) {
           return std::fpclassify(reference) == FP_SUBNORMAL ? 0.0f : reference;
         });
  // fmaxf folded from the first element: NaN is skipped from the second on, so only a block of NaNs
  // alone keeps one (scale NaN, every y NaN: code 0), where bitsandbytes starts from 0 and stores 0
  absmax("absmax-from-first-element",
         "the reference with the block absmax folded from its first |x| (fmax) instead of from 0: an all-NaN block's absmax NaN",
         [](std::span<const float> block, bool, float) {
           float a = std::fabs(block[0]);
           for (float v : block.subspan(1)) a = std::fmax(a, std::fabs(v));
           return a;
         });
  // a loop bound of the tail's length minus one (the full blocks are right)
  absmax("tail-absmax-short", "the reference with a partial last block's absmax taken without its last element",
         [](std::span<const float> block, bool tail, float reference) {
           if (!tail || block.size() < 2) return reference;
           float a = 0.0f;  // bitsandbytes' own fold (max from 0, NaN ignored) over one element fewer
           for (float v : block.first(block.size() - 1)) a = std::fmax(a, std::fabs(v));
           return a;
         });
  // a kernel written for quantize_blockwise's default: the reference at block size 4096, each stored
  // scale the absmax of the 4096-block that holds its block (the case's block size divides 4096)
  out.push_back({"block-size-4096", "the reference in blocks of 4096 (quantize_blockwise's default) whatever block_size says",
                 [spec](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                   const std::size_t block = positive_size_param(p, "block_size");
                   if (block >= kDefaultBlock || kDefaultBlock % block != 0) return std::nullopt;
                   nlohmann::json wide = p;
                   wide["block_size"] = kDefaultBlock;
                   const Case run = with_outputs(e, spec->run(e, wide, 1));
                   const std::vector<float> wide_scale = run.require("scale").f32();
                   std::vector<float> scale(e.require("scale").element_count());
                   for (std::size_t s = 0; s < scale.size(); ++s) {
                     const std::size_t w = s * block / kDefaultBlock;
                     if (w >= wide_scale.size()) return std::nullopt;
                     scale[s] = wide_scale[w];
                   }
                   return with_codes(*spec, e, p, run.require("codes").u8(), std::move(scale));
                 }});
  // q[code] * absmax under flush-to-zero: a subnormal product becomes a zero of its sign
  out.push_back({"flush-subnormal-dequant", "the reference with subnormal dequantized values flushed to zero",
                 [](const Case& e, const nlohmann::json&) -> std::optional<Case> {
                   const Tensor* dequant = e.find("dequant");
                   if (!dequant) return std::nullopt;
                   return with_outputs(e, {with_subnormals_flushed(*dequant)});
                 }});
  // A NaN dequantized value (0 * Inf: the unsigned map's code 0 in a block holding an Inf) written as
  // the C/C++ NAN, std::numeric_limits<float>::quiet_NaN(), 0x7FC00000, where x86's multiply gives its
  // default NaN 0xFFC00000
  out.push_back({"dequant-nan-positive", "the reference with a NaN dequantized value written as +NaN (0x7FC00000)",
                 [](const Case& e, const nlohmann::json&) {
                   return dequant_edited(e, [](float v) { return std::isnan(v) ? float_from_bits(0x7FC00000u) : v; });
                 }});
}

}  // namespace lowbit::diagnosis
