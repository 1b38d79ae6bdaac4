#pragma once
// The shape of a generated input (golden generate, verify, default_inputs): {count} for a 1-D format;
// for a 2-D format (FormatSpec::input_tile) whole tiles, one tile wide (tiles x tile rows by the tile's
// columns: each tile is a contiguous run of the generated values, so that the generators' blocks are
// the format's groups and tiles), the fixed lists
// (special, edges, scaled-edges without n) padded with +0.0 to whole tiles, as special is padded to one
// block for a whole-block format. A zero never raises a group's or tile's absmax, so the values keep
// the scales they have alone, and the padding is compared like every other element.
#include <cstdint>
#include <string>
#include <vector>

#include "lowbit/formats.hpp"
#include "lowbit/generators.hpp"

namespace lowbit {

struct InputShape {
  std::vector<std::int64_t> shape;  // {count} or {rows, cols}
  std::size_t padding = 0;          // +0.0 values to append to the generated ones
  std::string described;            // for the case's input metadata (" (shaped 64 x 64: ...)"); empty for 1-D
};

// count: the values the input spec generated. std::invalid_argument naming the input spec, the
// format, its tile and rule, when the count is 0 or (not a fixed list) not whole tiles.
InputShape input_shape(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params, std::size_t count);

// The count of the default battery's random inputs: 4096, or for a 2-D format whole tiles, at least
// 4096 values and four tiles (so that a scale bug shows between tiles too).
std::size_t battery_count(const FormatSpec& format, const nlohmann::json& params);

}  // namespace lowbit
