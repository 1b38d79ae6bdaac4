// The block-level variants of bitsandbytes' block-wise quantizer (bnb.blockwise8.*): what a kernel of
// the CPU back end does differently with a whole block rather than with one element. Its block absmax
// (a subnormal one taken as 0, a fold started from the first |x|, a partial last block read one
// element short), its block size (4096 whatever block_size says), and its dequantized values (a
// subnormal flushed, a NaN written as +NaN): variants_blocks.cpp's, with the CPU table's coding of a
// block here. The element variants (the search, the table, the normalization) are
// variants_codebook.cpp's; the other back ends, variants_params.cpp's.
#include <memory>

#include "lowbit/codebook.hpp"
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

}  // namespace

void add_bnb_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  if (!f.name.starts_with("bnb.blockwise8.")) return;
  add_absmax_slips(f, out, cpu_requantizer);
  add_default_block_size(f, out, "quantize_blockwise's default, bitsandbytes functional.py");
  // q[code] * absmax can be subnormal (a block of subnormals), and 0 * Inf is NaN (the unsigned map's
  // code 0 in a block holding an Inf)
  add_dequant_slips(out, true, true);
}

}  // namespace lowbit::diagnosis
