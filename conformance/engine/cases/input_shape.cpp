#include "lowbit/input_shape.hpp"

#include <algorithm>
#include <stdexcept>

namespace lowbit {

namespace {

bool fixed_list(const InputSpec& spec) {
  for (const char* kind : {"special", "edges", "scaled-edges", "table-edges", "tiny-blocks", "special-blocks", "nan-tiles",
                           "all-bf16", "all-f16"})
    if (spec.kind == kind) return !spec.args.count("n");
  return false;
}

std::string tile_text(const InputTile& t) { return std::to_string(t.rows) + " x " + std::to_string(t.cols); }

InputTile tile_of(const FormatSpec& format, const nlohmann::json& params) {
  const InputTile t = format.input_tile(params);
  if (t.rows < 1 || t.cols < 1 || t.rows > (std::int64_t{1} << 31) || t.cols > (std::int64_t{1} << 31))
    throw std::invalid_argument(format.name + ": no input tile of " + tile_text(t) + " for these params");
  return t;
}

}  // namespace

InputShape input_shape(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params, std::size_t count) {
  if (!format.input_tile) return {{static_cast<std::int64_t>(count)}, 0, ""};
  const InputTile t = tile_of(format, params);
  const auto area = static_cast<std::uint64_t>(t.rows) * static_cast<std::uint64_t>(t.cols);
  const std::string takes = format.name + " takes a 2-D input of whole " + tile_text(t) + " tiles (" + t.rule + ")";
  if (count == 0) throw std::invalid_argument("input spec '" + spec.text + "': no values; " + takes);
  const std::uint64_t tiles = (count + area - 1) / area;
  if (tiles * area != count && !fixed_list(spec))
    throw std::invalid_argument("input spec '" + spec.text + "': " + takes + ": " + std::to_string(count) +
                                " values are not; give n a multiple of " + std::to_string(area));
  if (tiles * area > static_cast<std::uint64_t>(kMaxCount))
    throw std::invalid_argument("input spec '" + spec.text + "': " + takes + ": padded to whole tiles it would hold " +
                                std::to_string(tiles * area) + " values, more than the largest input");
  InputShape s;
  // one tile wide: each tile is a contiguous run of the generated values, so that their block
  // structure (edges' blocks led by an absmax of 1, one outlier per block, special cycled) is the tiles'
  s.shape = {static_cast<std::int64_t>(tiles) * t.rows, t.cols};
  s.padding = static_cast<std::size_t>(tiles * area - count);
  s.described = " (shaped " + std::to_string(s.shape[0]) + " x " + std::to_string(s.shape[1]) + ": " + takes;
  if (s.padding) s.described += "; padded with " + std::to_string(s.padding) + " zeros";
  s.described += ")";
  return s;
}

std::size_t battery_count(const FormatSpec& format, const nlohmann::json& params) {
  constexpr std::size_t kCount = 4096;
  if (!format.input_tile) return kCount;
  const InputTile t = tile_of(format, params);
  const auto area = static_cast<std::size_t>(t.rows * t.cols);
  return area * std::max<std::size_t>(4, (kCount + area - 1) / area);
}

}  // namespace lowbit
