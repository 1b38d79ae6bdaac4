// The block-level variants of bitsandbytes' block-wise quantizer (bnb.blockwise8.*): what a kernel of
// the CPU back end does differently with a whole block rather than with one element. Its block absmax
// (a subnormal one taken as 0, a fold started from the first |x|, a partial last block read one
// element short), its block size (4096 whatever block_size says), and its dequantized values (a
// subnormal flushed, a NaN written as +NaN: variants_blocks.cpp's, with the CPU table's coding of a
// block here; a bf16 input's truncated to bf16). The element variants (the search, the table, the normalization) are
// variants_codebook.cpp's; the other back ends, variants_params.cpp's.
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/float_bits.hpp"
#include "variants.hpp"

namespace lowbit::diagnosis {

namespace {

// bitsandbytes' CPU back end coding a block again from another absmax: absmax 0 gives codes 0, another
// the table's code of x * (1 / absmax). Null for another back end, dtype or qmap.
BlockRequantizer cpu_requantizer(const Case& e, const nlohmann::json& p) {
  const Tensor* qmap = e.find("qmap");
  if (p.value("backend", "") != "cpu" || !qmap || qmap->dtype != DType::F32 || qmap->element_count() != 256) return {};
  auto lut = std::make_shared<const codebook::BnbCpuLut>(qmap->f32());
  return [lut](std::span<const float> block, float absmax, std::span<std::uint8_t> codes) {
    for (std::size_t i = 0; i < block.size(); ++i) codes[i] = absmax == 0.0f ? 0 : (*lut)(block[i] * (1.0f / absmax));
    return absmax;
  };
}

// Two threads splitting the elements at (n / 2) rounded down to a multiple of 64 instead of splitting
// the blocks: the block holding the split coded as two partial blocks, each with its own absmax, the
// stored absmax the second part's. nullopt where the split falls on a block boundary.
std::optional<Case> split_mid_block(const FormatSpec& f, const Case& e, const nlohmann::json& p) {
  const Tensor* input = e.find("input");
  if (!input || input->dtype != DType::F32) return std::nullopt;
  const std::vector<float> x = input->f32();
  const std::size_t block = positive_size_param(p, "block_size"), mid = (x.size() / 2) & ~std::size_t{63};
  const std::size_t b = mid / block, start = b * block, end = std::min(x.size(), start + block);
  std::vector<float> scale = e.require("scale").f32();
  std::vector<std::uint8_t> codes = e.require("codes").u8();
  if (start == mid || b >= scale.size() || codes.size() != x.size()) return std::nullopt;
  const BlockRequantizer requantize = cpu_requantizer(e, p);
  if (!requantize) return std::nullopt;
  for (const auto& [from, to] : {std::pair{start, mid}, std::pair{mid, end}}) {
    const std::span<const float> part = std::span<const float>(x).subspan(from, to - from);
    float absmax = 0.0f;  // the format's own fold: max from 0, NaN ignored
    for (float v : part) absmax = std::max(absmax, std::fabs(v));
    scale[b] = requantize(part, absmax, std::span<std::uint8_t>(codes).subspan(from, to - from));
  }
  return with_codes(f, e, p, std::move(codes), std::move(scale));
}

// bitsandbytes' dequantized values of a bf16 input (its dtype) as the top 16 bits of the float32
// q[code] * absmax, truncated, where the library rounds to nearest even (CPU float_to_bf16, torch's
// .to(bfloat16)); the codes and absmaxes the reference's
std::optional<Case> bf16_dequant_truncated(const Case& e, const nlohmann::json& p) {
  const Tensor* dequant = e.find("dequant");
  const Tensor* qmap = e.find("qmap");
  if (!dequant || dequant->dtype != DType::BF16 || !qmap || qmap->dtype != DType::F32) return std::nullopt;
  const std::vector<float> d = blockwise::bnb_dequantize(e.require("codes").u8(), e.require("scale").f32(), qmap->f32(),
                                                         positive_size_param(p, "block_size"));
  if (d.size() != dequant->element_count()) return std::nullopt;
  std::vector<std::uint8_t> bytes;
  for (float v : d) {
    const std::uint32_t top = bits_of(v) >> 16;
    bytes.push_back(static_cast<std::uint8_t>(top & 0xFFu));
    bytes.push_back(static_cast<std::uint8_t>(top >> 8));
  }
  return with_outputs(e, {Tensor::from_bytes("dequant", DType::BF16, dequant->shape, bytes)});
}

}  // namespace

void add_bnb_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  if (!f.name.starts_with("bnb.blockwise8.")) return;
  add_absmax_slips(f, out, cpu_requantizer);
  add_default_block_size(f, out, "quantize_blockwise's default, bitsandbytes functional.py");
  // a kernel's own threads splitting the elements where the library's split the blocks (the battery's
  // input of 2^20 + 1000 elements)
  const FormatSpec* spec = &f;
  out.push_back({"threads-split-mid-block",
                 "the reference with the block holding element (n / 2) & ~63 coded as two partial blocks split there "
                 "(threads splitting the elements, not the blocks), the stored absmax the second part's",
                 [spec](const Case& e, const nlohmann::json& p) { return split_mid_block(*spec, e, p); }});
  // q[code] * absmax can be subnormal (a block of subnormals), and 0 * Inf is NaN (the unsigned map's
  // code 0 in a block holding an Inf)
  add_dequant_slips(out, true, true);
  out.push_back({"dequant-bf16-truncated",
                 "the reference with a bf16 input's dequantized values truncated to bf16, not rounded to nearest even",
                 bf16_dequant_truncated});
}

}  // namespace lowbit::diagnosis
