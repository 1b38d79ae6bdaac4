// The variants of a codebook quantizer: torchao's block-wise 8- and 4-bit states
// (torchao.codebook{8,4}.*) and bitsandbytes' block-wise quantizer (bnb.blockwise8.*, its CPU table
// and the CUDA kernel's search). Each changes one thing of the reference: the normalization (x * (1/s)
// for x / s, or the converse), the tie rule of the search, the CPU table's index or cell boundaries,
// the inputs flushed (denormals-are-zero), or torchao's block absmax (skipping NaN, without its 1e-12
// clip). bitsandbytes' block variants are variants_bnb.cpp's; its other back ends are variants of the
// backend parameter (variants_params.cpp).
#include <algorithm>
#include <bit>
#include <cmath>
#include <memory>

#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/float_bits.hpp"
#include "variants.hpp"

namespace lowbit::diagnosis {

namespace {

using Search = std::function<std::uint8_t(float y)>;
using Normalize = float (*)(float x, float s);
float divided(float x, float s) { return x / s; }
float times_reciprocal(float x, float s) { return x * (1.0f / s); }

// The reference's search and normalization of a case, by format and back end; a null search where
// the diagnosis knows no element variant (bitsandbytes' pure-PyTorch back end mixes both by block).
struct Quantizer {
  bool torchao = false;
  Normalize normalize = divided;
  Normalize other = times_reciprocal;
  const char* other_name = "reciprocal";
  const char* other_description = "the reference with x * (1 / s) for x / s";
  Search search;
  std::vector<float> qmap;
};

std::optional<Quantizer> quantizer_of(const FormatSpec& f, const Case& e, const nlohmann::json& p) {
  const Tensor* qmap = e.find("qmap");
  if (!qmap || qmap->dtype != DType::F32) return std::nullopt;
  Quantizer q;
  q.qmap = qmap->f32();
  if (f.name.starts_with("torchao.codebook")) {
    if (q.qmap.size() != 16 && q.qmap.size() != 256) return std::nullopt;
    q.torchao = true;
    q.search = [t = q.qmap](float y) { return codebook::torchao_search(y, t); };
    return q;
  }
  if (!f.name.starts_with("bnb.blockwise8.") || q.qmap.size() != 256) return std::nullopt;
  q.normalize = times_reciprocal;
  q.other = divided;
  q.other_name = "division";
  q.other_description = "the reference with x / s for x * (1 / s)";
  const std::string backend = p.value("backend", "");
  if (backend == "cpu") q.search = [lut = std::make_shared<const codebook::BnbCpuLut>(q.qmap)](float y) { return (*lut)(y); };
  else if (backend == "cuda-ieee") q.search = [t = q.qmap](float y) { return codebook::bnb_cuda_search(y, t); };
  else return std::nullopt;
  return q;
}

// The codes with each element's code from code_of(x, s) (its input and its block's reference
// scale); where the scale is zero or not finite, or the input NaN, the reference's code is kept (a
// zero or NaN block's codes are the format's own rule). infinite_scales: an infinite scale's codes
// made by code_of too (bitsandbytes' CPU table codes x * (1 / Inf) = 0 by its cells).
template <class CodeOf>
std::optional<std::vector<std::uint8_t>> recode(const Case& e, CodeOf code_of, bool infinite_scales = false) {
  const Tensor* input = e.find("input");
  const Tensor& ref = e.require("codes");
  if (!input || input->element_count() != ref.bytes.size()) return std::nullopt;
  const std::vector<float> scale = e.require("scale").f32();
  const BlockMap map = block_map(e, "codes");
  std::vector<std::uint8_t> codes = ref.u8();
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const std::size_t b = map.block_of(i);
    if (b >= scale.size()) return std::nullopt;
    const float x = input->value_as_float(i), s = scale[b];
    if (std::isnan(x) || std::isnan(s) || (std::isinf(s) && !infinite_scales) || s == 0.0f) continue;
    codes[i] = code_of(x, s);
  }
  return codes;
}

// torchao's last step with ties down: (y - lo) > half where torchao has >=.
std::uint8_t torchao_ties_down(float y, std::span<const float> q) {
  const std::size_t c = codebook::torchao_bracket(y, q), up = std::min(c + 1, q.size() - 1);
  return static_cast<std::uint8_t>(y - q[c] > (q[up] - q[c]) * 0.5f ? up : c);
}

// bitsandbytes' CPU table with another index rule or other cell boundaries.
struct LutVariant {
  std::vector<std::uint8_t> table;  // by index, 65 536 entries
  std::uint16_t (*index)(float y);
  std::uint8_t operator()(float y) const { return table[index(y)]; }
};
std::uint16_t index_unfused(float y) {  // (y + 1) / 2 * 65535 + 0.5 rounded twice
  if (std::isnan(y)) return 0;
  y = std::clamp(y, -1.0f, 1.0f);
  const float scaled = (y + 1.0f) * 0.5f * 65535.0f;
  return static_cast<std::uint16_t>(scaled + 0.5f);
}
std::uint16_t index_truncated(float y) {  // no rounding half: the cell below
  if (std::isnan(y)) return 0;
  y = std::clamp(y, -1.0f, 1.0f);
  return static_cast<std::uint16_t>((y + 1.0f) * 0.5f * 65535.0f);
}
// The CPU table's code of cell t: the midpoints 0.5 * (q[j] + q[j + 1]) below its grid value v_t = -1 +
// (2 t) / 65535 (in float, midpoint < v_t); a variant counts those at v_t too, or computes v_t in double.
enum class Grid { Reference, MidpointUp, Double };
std::vector<std::uint8_t> lut_table(std::span<const float> q, Grid grid) {
  const codebook::BnbCpuLut lut(q);  // alive while its table is copied
  const std::span<const std::uint8_t> ref = lut.table();
  std::vector<std::uint8_t> table(ref.begin(), ref.end());
  if (grid == Grid::Reference) return table;
  std::size_t code = 0;
  const auto below = [grid](float midpoint, int i) {
    if (grid == Grid::Double) return midpoint < -1.0 + (2.0 * i) / 65535.0;
    return midpoint <= -1.0f + (2.0f * static_cast<float>(i)) / 65535.0f;
  };
  for (int i = 0; i < 65536; ++i) {
    while (code + 1 < q.size() && below(0.5f * (q[code] + q[code + 1]), i)) ++code;
    table[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(code);
  }
  return table;
}

// torchao's block absmax another way: NaN skipped (C's fmax, as a CPU kernel writes the reduction;
// a signalling NaN still gives NaN) or kept as torch.amax does, with or without the 1e-12 clip.
float torchao_absmax(std::span<const float> block, bool keep_nan, bool clip) {
  if (keep_nan && std::any_of(block.begin(), block.end(), [](float v) { return std::isnan(v); }))
    return float_from_bits(0x7FC00000u);  // torch.amax's canonical NaN, which the clip keeps
  float amax = 0.0f;
  for (float v : block) amax = std::fmax(amax, std::fabs(v));
  return clip && !std::isnan(amax) ? std::max(amax, 1e-12f) : amax;
}

}  // namespace

void add_codebook_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  const bool torchao = f.name.starts_with("torchao.codebook");
  if (!torchao && !f.name.starts_with("bnb.blockwise8.")) return;
  const FormatSpec* spec = &f;
  // An element variant: the code of (x, s) from the case's reference quantizer q.
  using CodeRule = std::function<std::uint8_t(const Quantizer& q, float x, float s)>;
  const auto element = [&](std::string name, std::string description, CodeRule rule) {
    out.push_back({std::move(name), std::move(description),
                   [spec, rule](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                     const auto q = quantizer_of(*spec, e, p);
                     if (!q || !q->search) return std::nullopt;
                     auto codes = recode(e, [&](float x, float s) { return rule(*q, x, s); });
                     if (!codes) return std::nullopt;
                     return with_codes(*spec, e, p, std::move(*codes));
                   }});
  };
  if (torchao)
    element("reciprocal", "the reference with x * (1 / s) for x / s",
            [](const Quantizer& q, float x, float s) { return q.search(q.other(x, s)); });
  else
    element("division", "the reference with x / s for x * (1 / s)",
            [](const Quantizer& q, float x, float s) { return q.search(q.other(x, s)); });
  if (torchao) {
    element("ties-down", "the reference with ties to the lower code on torchao's own boundary test",
            [](const Quantizer& q, float x, float s) { return torchao_ties_down(x / s, q.qmap); });
    element("exact-nearest-ties-down", "the exact nearest entry, ties to the lower code",
            [](const Quantizer& q, float x, float s) {
              return codebook::exact_nearest(x / s, q.qmap, codebook::Ties::Lower);
            });
    element("exact-nearest-ties-up", "the exact nearest entry, ties to the upper code",
            [](const Quantizer& q, float x, float s) {
              return codebook::exact_nearest(x / s, q.qmap, codebook::Ties::Upper);
            });
  } else {
    element("exact-search", "the exact nearest entry of bitsandbytes <= 0.45's CPU search, not the 0.49 lookup table",
            [](const Quantizer& q, float x, float s) {
              return codebook::bnb_cpu_exact_search(q.normalize(x, s), q.qmap);
            });
    // first_minus_one: the table built from the qmap with q[0] = -1 (the dequant reads the case's)
    const auto lut = [&](std::string name, std::string description, std::uint16_t (*index)(float), Grid grid,
                         bool first_minus_one = false) {
      out.push_back({std::move(name), std::move(description),
                     [spec, index, grid, first_minus_one](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                       const auto q = quantizer_of(*spec, e, p);
                       if (!q || p.value("backend", "") != "cpu") return std::nullopt;
                       std::vector<float> map = q->qmap;
                       if (first_minus_one) map.front() = -1.0f;
                       const LutVariant v{lut_table(map, grid), index};
                       auto codes = recode(e, [&](float x, float s) { return v(x * (1.0f / s)); }, true);
                       if (!codes) return std::nullopt;
                       return with_codes(*spec, e, p, std::move(*codes));
                     }});
    };
    lut("table-index-unfused", "the CPU table indexed by (y + 1) / 2 * 65535 + 0.5 without the fused multiply-add",
        index_unfused, Grid::Reference);
    lut("table-index-truncated", "the CPU table indexed without rounding (the cell below)", index_truncated, Grid::Reference);
    lut("table-midpoint-up", "the CPU table with a grid point on a midpoint given the upper code", codebook::BnbCpuLut::index_of,
        Grid::MidpointUp);
    lut("table-grid-double", "the CPU table with its grid -1 + 2t / 65535 computed in double (bitsandbytes' is float)",
        codebook::BnbCpuLut::index_of, Grid::Double);
    // bitsandbytes <= 0.49.2's quantize_cpu set code[0] = -1.0f before searching (csrc/cpu_ops.cpp):
    // a map that does not start at -1 (the unsigned ones) gets another first cell boundary
    lut("table-code0-minus-one", "the CPU table built with the map's first entry set to -1 (bitsandbytes <= 0.49's "
        "code[0] = -1.0f)", codebook::BnbCpuLut::index_of, Grid::Reference, true);
  }
  // denormals-are-zero over the whole kernel: the block absmax too is taken over the flushed inputs
  // (a block of subnormals is a zero block), so the reference runs on them
  out.push_back({"flush-subnormal-inputs", "the reference with subnormal inputs taken as zero (its block absmax too)",
                 [spec](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                   const Tensor* input = e.find("input");
                   if (!input) return std::nullopt;
                   Case flushed = e;
                   flushed.add(with_subnormals_flushed(*input));
                   return with_outputs(e, spec->run(flushed, p, 1));
                 }});
  if (!torchao) return;
  const auto scale = [&](std::string name, std::string description, bool keep_nan, bool clip) {
    out.push_back({std::move(name), std::move(description),
                   [spec, keep_nan, clip](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                     const auto q = quantizer_of(*spec, e, p);
                     if (!q) return std::nullopt;
                     return requantized(
                         *spec, e, p, [&](std::span<const float> b) { return torchao_absmax(b, keep_nan, clip); },
                         [&](float x, float s) { return q->search(x / s); });
                   }});
  };
  scale("absmax-ignores-nan", "the reference with a block absmax that skips NaN", false, true);
  scale("scale-without-clip", "the reference without the 1e-12 floor of the block absmax", true, false);
  // an element's block found by i >> ctz(block_size), a power of two assumed: at another block size
  // each element divided by another stored block's scale (the last one past the end)
  out.push_back({"block-index-by-shift",
                 "the reference with element i divided by the scale of block i >> ctz(block_size) (a power-of-two "
                 "block size assumed; the last block's past the end)",
                 [spec](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                   const auto q = quantizer_of(*spec, e, p);
                   const Tensor* input = e.find("input");
                   const std::size_t block = positive_size_param(p, "block_size");
                   if (!q || !input || input->dtype != DType::F32 || std::has_single_bit(block)) return std::nullopt;
                   const std::vector<float> x = input->f32(), scale = e.require("scale").f32();
                   if (scale.empty() || x.size() != e.require("codes").element_count()) return std::nullopt;
                   const int shift = std::countr_zero(block);
                   std::vector<std::uint8_t> codes(x.size());
                   for (std::size_t i = 0; i < x.size(); ++i)
                     codes[i] = q->search(x[i] / scale[std::min(i >> shift, scale.size() - 1)]);
                   return with_codes(*spec, e, p, std::move(codes));
                 }});
  // torchao's optimizers' block_size keyword (Adam8bit 256, Adam4bit 128) hard-coded. The dequant: its
  // scale is at least 1e-12 and the map's smallest nonzero magnitude far above 2^-126 / 1e-12, so
  // q * scale is never subnormal (no flush to find); a NaN scale is torch.amax's +NaN 0x7FC00000,
  // which q * scale keeps, so another NaN is 0 * Inf only: the unsigned 8-bit map's code 0, which its
  // search gives Inf / Inf in a block of Infs (special-blocks). The signed maps' zero needs an Inf
  // block without NaN holding a zero, which the battery has not; the unsigned 4-bit map has no zero.
  add_default_block_size(f, out, "torchao's optimizer default, torchao 0.18 optim/adam.py");
  add_dequant_slips(out, false, f.name == "torchao.codebook8.unsigned");
}

}  // namespace lowbit::diagnosis
