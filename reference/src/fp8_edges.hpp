#pragma once
// The FP8 grid's boundary inputs: every finite code's value, every midpoint between neighbouring codes
// with its float32 neighbours, both signs, and the special values (zeros, subnormals, extremes, Inf,
// NaN). The `edges` input of the fp8.* casts and of COAT's element-wise fake quantizers, which round
// to the same grid (engine-internal: the registry's entries share it).
#include <vector>

#include "lowbit/fp8.hpp"

namespace lowbit {
std::vector<float> fp8_grid_edges(fp8::FormatId id);
}  // namespace lowbit
