#pragma once
// Private to diagnosis/: the variants of each format family (variants_fp8.cpp, variants_codebook.cpp,
// variants_params.cpp) and what they share: a case with other codes and scales, its dequantized
// values and packed codes made again from them, as the format's own dequantizer makes them.
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "lowbit/diagnosis.hpp"

namespace lowbit::diagnosis {

// `expected` with its codes (same dtype and shape) and, when given, its per-block scale replaced; the
// `dequant` output made again from them by the format's dequantizer (when it is an F32 output and
// keep_dequant is false) and `codes_packed` by torchao's packing. nullopt when the dequant cannot be
// made again (another dtype, no dequantizer).
std::optional<Case> with_codes(const FormatSpec& f, const Case& expected, const nlohmann::json& params,
                               std::vector<std::uint8_t> codes, std::optional<std::vector<float>> scale = std::nullopt,
                               bool keep_dequant = false);

// A whole-block format (torchao's) quantized again from the case's F32 input with another block
// scale: scale_of(block) for each block of the param block_size, code_of(x, scale) for each element,
// the dequant made again (with_codes). nullopt for another input dtype or a partial block.
std::optional<Case> requantized(const FormatSpec& f, const Case& expected, const nlohmann::json& params,
                                const std::function<float(std::span<const float> block)>& scale_of,
                                const std::function<std::uint8_t(float x, float scale)>& code_of);

// `expected` with the outputs of another run (the reference under other params, another format's).
Case with_outputs(const Case& expected, std::vector<Tensor> outputs);

// `t` with each subnormal element (of its float dtype) a zero of its sign, as flush-to-zero gives it.
Tensor with_subnormals_flushed(const Tensor& t);

// The block of each element of `codes` under the case's layout, and whether the last block is partial.
struct Blocks {
  std::size_t size = 0;   // elements in a full block
  std::size_t count = 0;  // blocks
  bool partial_tail = false;
};
Blocks blocks_of(const Case& c);

// How a format codes one block again from another absmax (variants_blocks.cpp's slips): it writes the
// block's codes and returns its stored scale. Made per case (a table, a qmap); null where the format
// has none for the case (another back end).
using BlockRequantizer = std::function<float(std::span<const float> block, float absmax, std::span<std::uint8_t> codes)>;
using BlockRequantizerOf = std::function<BlockRequantizer(const Case& expected, const nlohmann::json& params)>;

// variants_blocks.cpp, for the block formats where each slip is possible: the block-absmax slips
// (absmax-subnormal-zero, absmax-from-first-element, tail-absmax-short) of a format whose absmax is
// max |x| from 0, NaN ignored, over blocks of block_size (a partial tail allowed); the reference at
// the format's default block size whatever block_size says (block-size-<default>); the dequant's
// slips (flush-subnormal-dequant where a product q * scale can be subnormal, dequant-nan-positive
// where the battery reaches a dequantized NaN other than +NaN 0x7FC00000).
void add_absmax_slips(const FormatSpec& f, std::vector<KnownVariant>& out, BlockRequantizerOf requantizer_of);
void add_default_block_size(const FormatSpec& f, std::vector<KnownVariant>& out, const std::string& library_default);
void add_dequant_slips(std::vector<KnownVariant>& out, bool subnormal_products, bool other_nans);

void add_fp8_variants(const FormatSpec& f, std::vector<KnownVariant>& out);       // casts, torchao.fp8, fp8.perblock
void add_codebook_variants(const FormatSpec& f, std::vector<KnownVariant>& out);  // torchao codebooks, bnb.blockwise8
void add_bnb_variants(const FormatSpec& f, std::vector<KnownVariant>& out);       // bnb.blockwise8's blocks
void add_coat_variants(const FormatSpec& f, std::vector<KnownVariant>& out);      // coat.act.pergroup, coat.act.perblock
void add_coat_group_variants(const FormatSpec& f, std::vector<KnownVariant>& out);  // their group reductions
void add_coat_optimizer_variants(const FormatSpec& f, std::vector<KnownVariant>& out);  // COAT's AdamW launches
void add_optimizer_variants(const FormatSpec& f, std::vector<KnownVariant>& out);  // optimizer steps, CPU and CUDA
void add_coat_symm_variants(const FormatSpec& f, std::vector<KnownVariant>& out);   // coat.fake.symm's tie rule
void add_param_variants(const FormatSpec& f, std::vector<KnownVariant>& out);     // another value of a parameter
void add_tail_variants(const FormatSpec& f, std::vector<KnownVariant>& out);      // a partial last block left unwritten

}  // namespace lowbit::diagnosis
