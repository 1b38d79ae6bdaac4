#include "lowbit/layout.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

namespace lowbit {

namespace {

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// The extent along an axis of `axis` elements (at least 1, so that empty tensors divide safely).
std::size_t extent_along(const Extent& e, std::size_t axis, const nlohmann::json& params) {
  const std::size_t whole = std::max<std::size_t>(axis, 1);
  if (e.count > 0) return static_cast<std::size_t>(e.count);
  if (e.param.empty()) return whole;
  const std::int64_t v = extent_param(e, params);
  if (v == -1) return whole;
  // at least 1: a straddling extent smaller than a stored element (block_size 1 of two codes a byte)
  // divides nothing by zero here, and resolve_layout lays it out as straddling
  return std::max<std::size_t>(1, static_cast<std::size_t>(v / e.per_stored));
}

}  // namespace

std::int64_t extent_param(const Extent& e, const nlohmann::json& params) {
  const auto it = params.find(e.param);
  const bool whole_number = it != params.end() && it->is_number_integer();
  const std::int64_t v = whole_number ? it->get<std::int64_t>() : 0;
  if (!whole_number || v == 0 || v > INT32_MAX || (v < 0 && !(v == -1 && e.minus_one_is_whole_axis)))
    throw std::invalid_argument(fmt::format("{} must be a whole number from 1 to 2147483647{} ({})", e.param,
                                            e.minus_one_is_whole_axis ? ", or -1 for the whole axis" : "",
                                            it == params.end() ? "it is missing" : "got " + it->dump()));
  if (v % e.per_stored != 0 && !e.may_straddle)
    throw std::invalid_argument(fmt::format("{} ({}) must be a multiple of {}: {} per stored element", e.param, v,
                                            e.per_stored, e.per_stored));
  return v;
}

Layout blocks(Extent size, std::vector<std::string> scales) { return {false, elements(1), std::move(size), std::move(scales)}; }
Layout row_groups(Extent size, std::vector<std::string> scales) { return {true, elements(1), std::move(size), std::move(scales)}; }
Layout tiles(Extent rows, Extent columns, std::vector<std::string> scales) {
  return {true, std::move(rows), std::move(columns), std::move(scales)};
}
Layout per_tensor(std::vector<std::string> scales) { return {false, {}, {}, std::move(scales)}; }
Layout block_entries() { return blocks(elements(1), {}); }

BlockMap resolve_layout(const Layout& layout, const std::vector<std::int64_t>& shape, const nlohmann::json& params) {
  std::size_t count = 1;
  for (std::int64_t d : shape) count *= static_cast<std::size_t>(d);
  const std::size_t columns = layout.matrix && !shape.empty() ? static_cast<std::size_t>(shape.back()) : count;
  const std::size_t rows = columns ? count / columns : 0;
  BlockMap m;
  m.columns = std::max<std::size_t>(columns, 1);
  m.block_rows = layout.matrix ? extent_along(layout.rows, rows, params) : 1;
  m.block_columns = extent_along(layout.columns, columns, params);
  m.grid_columns = ceil_div(m.columns, m.block_columns);
  m.blocks = count ? ceil_div(rows, m.block_rows) * m.grid_columns : 0;
  const Extent& e = layout.columns;
  if (!layout.matrix && e.count == 0 && !e.param.empty() && e.per_stored > 1) {
    const std::int64_t v = extent_param(e, params);
    if (v % e.per_stored != 0) {  // (extent_param let it through: the extent may straddle)
      m.straddling = static_cast<std::size_t>(e.per_stored);
      m.block_columns = static_cast<std::size_t>(v);
      m.grid_columns = count ? ceil_div(count * m.straddling, m.block_columns) : 1;
      m.blocks = count ? m.grid_columns : 0;
      m.description = fmt::format("blocks of {} elements, {} a stored element across their boundaries", v, m.straddling);
      return m;
    }
  }
  if (m.block_elements() == 1) m.description = "one element per block";
  else if (m.block_rows >= rows && m.block_columns >= columns) m.description = "one block, the whole tensor";
  else if (!layout.matrix) m.description = fmt::format("blocks of {}", m.block_columns);
  else if (m.block_rows == 1) m.description = fmt::format("1x{} groups along rows", m.block_columns);
  else m.description = fmt::format("{}x{} tiles", m.block_rows, m.block_columns);
  return m;
}

}  // namespace lowbit
