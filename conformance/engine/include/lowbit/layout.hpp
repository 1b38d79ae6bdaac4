#pragma once
// Which block of a blocked quantizer each element of a tensor belongs to, and which per-block
// tensors (scale, expansion exponent, centre) hold that block's entries. Every format declares a
// Layout per tensor in its registry entry (formats.hpp, TensorSpec); comparison and the explainers
// resolve it against a case's shape and parameters into a BlockMap. Blocks are numbered as the
// per-block tensors store them, so element j of a per-block tensor is block j.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lowbit {

// A block's extent along one axis: a fixed count, a case parameter, or (neither) the whole axis.
struct Extent {
  std::int64_t count = 0;       // > 0: that many elements
  std::string param;            // else, when set: this parameter's value
  std::int64_t per_stored = 1;  // the parameter counts this many per stored element (4-bit codes: two per byte)
  bool minus_one_is_whole_axis = false;  // the parameter may be -1, meaning the whole axis (COAT's block_cut)
  // The parameter need not be a multiple of per_stored: a stored element then may hold elements of two
  // blocks (torchao's 4-bit packing pairs elements 2k and 2k + 1 whatever the block size), and lies in
  // the block of its first element.
  bool may_straddle = false;
};
inline Extent elements(std::int64_t n) { return {n, {}, 1, false, false}; }
inline Extent param_extent(std::string name, std::int64_t per_stored = 1) { return {0, std::move(name), per_stored, false, false}; }
inline Extent param_extent_or_whole_axis(std::string name) { return {0, std::move(name), 1, true, false}; }
// per_stored elements a stored element, packed across block boundaries (may_straddle).
inline Extent packed_param_extent(std::string name, std::int64_t per_stored) {
  return {0, std::move(name), per_stored, false, true};
}

// The value of an extent's parameter in params: a whole number from 1 to 2^31 - 1 (or -1 where the
// extent allows the whole axis), a multiple of per_stored unless the extent may straddle.
// std::invalid_argument naming it otherwise, "block_size must be a whole number from 1 to 2147483647 (got -1)".
std::int64_t extent_param(const Extent& e, const nlohmann::json& params);

struct Layout {
  bool matrix = false;  // blocks over rows (all leading dimensions) x columns (the last); else over the flattened tensor
  Extent rows, columns;  // a block's extent; the default, the whole axis, makes the whole tensor one block
  // Tensors holding one entry per block of this one. Where a block's entry differs between the
  // expected and the actual case, the mismatches of the block's elements are scale-propagated.
  std::vector<std::string> scales;
};

// Blocks of `size` consecutive elements of the flattened tensor, the last one possibly partial.
Layout blocks(Extent size, std::vector<std::string> scales);
// 1 x size groups along each row of a 2-D tensor (row-major: row r's groups follow row r-1's).
Layout row_groups(Extent size, std::vector<std::string> scales);
// rows x columns tiles of a 2-D tensor, numbered row-major over the grid of tiles.
Layout tiles(Extent rows, Extent columns, std::vector<std::string> scales);
// The whole tensor is one block, quantized with the single entry of each of `scales`.
Layout per_tensor(std::vector<std::string> scales);
// The tensor holds one entry per block of others: its element j is block j.
Layout block_entries();

// A Layout resolved for one tensor: element i lies in block block_of(i).
struct BlockMap {
  std::size_t columns = 1;                        // the tensor seen as rows x columns
  std::size_t block_rows = 1, block_columns = 1;  // a full block's extent
  std::size_t grid_columns = 1;                   // blocks per row of blocks
  std::size_t blocks = 0;
  std::string description;  // e.g. "128x128 tiles", "blocks of 256", for reports
  // > 1: a flat layout whose stored elements each hold this many of the blocks' elements, straddling
  // blocks (Extent::may_straddle with a block size that is not a multiple); block_columns then counts
  // the blocks' elements, and stored element i lies in the block of its first element.
  std::size_t straddling = 1;

  std::size_t block_elements() const { return block_rows * block_columns; }
  std::size_t block_of(std::size_t i) const {
    if (straddling > 1) return i * straddling / block_columns;
    return i / columns / block_rows * grid_columns + i % columns / block_columns;
  }
};

// Throws std::invalid_argument naming the parameter when extent_param refuses it.
BlockMap resolve_layout(const Layout& layout, const std::vector<std::int64_t>& shape, const nlohmann::json& params);

}  // namespace lowbit
