#pragma once
// The FP8 grid's boundary inputs: every finite code's value, every midpoint between neighbouring codes
// with its float32 neighbours, both signs, and the special values (zeros, subnormals, extremes, Inf,
// NaN). The `edges` input of the fp8.* casts and of COAT's element-wise fake quantizers, which round
// to the same grid (engine-internal: the registry's entries share it).
#include <vector>

#include "lowbit/fp8.hpp"

namespace lowbit {
std::vector<float> fp8_grid_edges(fp8::FormatId id);

// Inputs at a codebook's boundaries, in blocks of block_size each led by an absmax of exactly 1 (so
// y = x exactly, for the division and the reciprocal alike): every code value, every midpoint and its
// binary32 neighbours, both signs, zeros and subnormals; the last block zero-filled
// (formats_codebook.cpp). The edges of the block-wise formats and of COAT's group quantizers.
std::vector<float> codebook_edges(const std::vector<float>& q, std::size_t block_size);
// The FP8 grid in units of a block's absmax: every finite code's value / the largest, ascending.
std::vector<float> fp8_grid_over_absmax(fp8::FormatId id);
}  // namespace lowbit
