#pragma once
// The decision points of bitsandbytes' CPU back end (engine-internal: the registry's bnb.blockwise8.*
// entries): its 65 536-entry lookup table decides the code, not the codebook's midpoints
// (docs/formats/bnb-blockwise8.md, "The CPU lookup table"), so the edges of the midpoints lie inside
// its cells. These inputs lie on the cells' own boundaries.
#include <cstddef>
#include <vector>

namespace lowbit {

// For each cell t of the table where the code changes (lut[t] != lut[t - 1]) and its neighbours t - 1 and
// t + 1 (where only the index changes): y_t, the smallest float32 whose index is t. Under an absmax of 1
// (blocks led by 1) y_t and its two float32 neighbours; under each absmax of kTableEdgeAbsmaxes (not
// powers of two: x * (1 / a) and x / a disagree near some y_t) x = RN(y_t * a) and x 1 and 2 ulps either
// way. Whole blocks of block_size, each led by its absmax (every value's magnitude is at most it), the
// last zero-filled.
std::vector<float> bnb_cpu_table_edges(const std::vector<float>& qmap, std::size_t block_size);
inline constexpr float kTableEdgeAbsmaxes[] = {1.7f, 0.31415927f, 0.0037f, 1234.567f, 3.0f};

}  // namespace lowbit
