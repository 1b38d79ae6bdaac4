#pragma once
// The block-wise formats' inputs that aim at a block's own decision points rather than at the grid
// (generators.hpp's kinds tiny-blocks and special-blocks; docs/verifying-a-kernel.md, "What the
// battery reaches"): the absmax of a block where it is tiny or subnormal (where a reciprocal
// overflows, a 1e-12 clip applies, a flush to zero changes the scale), and blocks made only of one
// special value, with a last block that ends on its largest value.
#include <vector>

#include "lowbit/formats.hpp"
#include "lowbit/generators.hpp"

namespace lowbit {

// The format's edges (blocks led by an absmax of 1) times each absmax of kTinyAbsmaxes: tiny normal
// absmaxes below torchao's 1e-12 clip and near FLT_MIN, subnormal ones with a finite reciprocal and with
// one that overflows to infinity, and the smallest. Needs a block-wise format with edges (a 2-D
// format's padded with zeros to whole tiles first, so that each absmax's copy is whole tiles).
std::vector<float> tiny_blocks(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params);
inline constexpr float kTinyAbsmaxes[] = {1e-20f, 1.5e-38f, 3.0e-39f, 1e-40f, 4.2e-45f};

// Whole blocks of the format's block size (block_size, or COAT's group_size; a 2-D format's: whole
// tiles of its input_tile, every group and tile of them): all NaN (both signs,
// several payloads, 0xFFC00001 first), all infinite
// (+Inf and -Inf alternating), all -0.0, +0.0 and -0.0 alternating; then a last block that ends on its
// largest value (1.7, every earlier value smaller), partial (half a block, rounded up) where the format
// takes a partial tail, whole where it is 2-D, where it quantizes whole blocks only (FormatSpec::whole_blocks) or the
// block is one element (twice for a whole-block format of an odd block size: torchao's 4-bit packing
// needs an even count).
std::vector<float> special_blocks(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params);

// Three whole tiles of a 2-D group quantizer (COAT's coat.act.*: input_tile and group_size) of rising
// numbers with NaNs placed where a group reduction's NaN rules differ (docs/verifying-a-kernel.md,
// "What the battery reaches"): every row group led by a NaN and row 1 all NaN (groups of NaNs alone
// after a first group of numbers: a tensor max that keeps only the first group's NaN); the same down
// the columns (the transposed kernel's x^T groups); every row group ending on a NaN. std::invalid_argument
// naming the input spec for another format.
std::vector<float> nan_tiles(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params);

// An optimizer's gradients with the blocks real training gives (the optimizer formats' battery,
// docs/verifying-a-kernel.md "What the battery reaches"): normal values of the given std (1 by
// default, as the normal kind's), and five blocks of the format's block size that are not: a block of
// exact zeros (an embedding row no token touched: a zero state's absmax 0, sign(0)), a block of
// normal values times 1e-20 (squares subnormal: reciprocals of the state's absmax overflow), a block
// holding one NaN, one with one +Inf (a state's absmax +Inf, Inf / Inf), one with one -Inf. The
// five blocks move with the seed (block 5 seed + j, modulo the blocks, the last one partial where n
// is not whole blocks), so each of verify's three steps' gradients (seed s + k; 16 blocks or more)
// has them in other blocks: a parameter or state made NaN or infinite by an earlier step under a
// finite gradient. An optimizer's parameter is the normal kind's draw of the same n, seed and std
// (case_maker.cpp): a parameter of exact zeros would put its steps' cancellations, p - u with p near
// u, on every 1-ulp difference of torch's sqrt.
std::vector<float> gradient_blocks(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params,
                                   std::vector<float> normal);

// The values in one input_tile of a 2-D format for the params.
std::size_t tile_area(const FormatSpec& format, const nlohmann::json& params);

// The block size of the params that these inputs are made in (edge_block_param's), or
// std::invalid_argument naming the input spec when the format has none.
std::size_t input_block_size(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params);

}  // namespace lowbit
