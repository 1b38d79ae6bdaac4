#include "lowbit/block_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include "lowbit/float_bits.hpp"

namespace lowbit {

std::size_t input_block_size(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params) {
  const std::string key = edge_block_param(params);
  if (key.empty())
    throw std::invalid_argument("input spec '" + spec.text + "': " + spec.kind + " needs a block-wise format" +
                                (format.name.empty() ? std::string() : " (" + format.name + " is not one)"));
  return positive_size_param(params, key.c_str());
}

std::vector<float> tiny_blocks(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params) {
  input_block_size(spec, format, params);
  if (!format.edge_inputs)
    throw std::invalid_argument("input spec '" + spec.text + "': tiny-blocks needs a format with an edge-case generator" +
                                (format.name.empty() ? std::string() : " (" + format.name + " has none)"));
  // blocks led by an absmax of exactly 1: times a tiny absmax, each block's absmax is that absmax
  // (the product of 1 is exact), and every other value rounds into the tiny or subnormal range
  std::vector<float> base = format.edge_inputs(params);
  if (format.input_tile) {  // a 2-D format's edges as whole tiles, so that each absmax's copy starts a tile
    const std::size_t area = tile_area(format, params);
    base.resize((base.size() + area - 1) / area * area, 0.0f);
  }
  std::vector<float> out;
  out.reserve(base.size() * std::size(kTinyAbsmaxes));
  for (float absmax : kTinyAbsmaxes)
    for (float x : base) out.push_back(std::isfinite(x) ? x * absmax : x);
  return out;
}

std::size_t tile_area(const FormatSpec& format, const nlohmann::json& params) {
  const InputTile t = format.input_tile(params);
  return static_cast<std::size_t>(t.rows * t.cols);
}

std::vector<float> special_blocks(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params) {
  // a 2-D format's blocks are whole tiles of its shape rule (one tile wide, a tile is a contiguous run
  // of the values), so that every group or tile of the kernel, row-wise or column-wise, holds only the
  // one special value, and in the last tile, whose magnitudes rise along rows and down columns, every
  // group ends on its largest value
  const std::size_t block = format.input_tile ? tile_area(format, params) : input_block_size(spec, format, params);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> out;
  const auto fill = [&](auto value) {
    for (std::size_t k = 0; k < block; ++k) out.push_back(value(k));
  };
  // NaNs of both signs and several payloads, a negative one first: a scale or absmax that copies an
  // element's NaN is told from the library's own NaN (torch's canonical 0x7FC00000)
  const float nans[] = {float_from_bits(0xFFC00001u), nan, float_from_bits(0x7FD00000u), -nan};
  fill([&](std::size_t k) { return nans[k % 4]; });
  fill([&](std::size_t k) { return k % 2 ? -inf : inf; });
  fill([&](std::size_t) { return -0.0f; });
  fill([&](std::size_t k) { return k % 2 ? -0.0f : 0.0f; });
  // the last block: rising magnitudes of both signs, its largest value last, where a loop that stops
  // one short of the tail's end (or reads the whole block's length) finds another absmax
  const std::size_t tail = format.whole_blocks || format.input_tile || block < 2 ? block : (block + 1) / 2;
  // torchao's 4-bit states pack codes in pairs over the whole state: a whole-block format with an odd
  // block size gets that last block twice, so that the count is even
  for (int copy = format.whole_blocks && block % 2 ? 2 : 1; copy > 0; --copy) {
    for (std::size_t k = 0; k + 1 < tail; ++k)
      out.push_back((k % 2 ? -1.0f : 1.0f) * (0.25f + static_cast<float>(k) / static_cast<float>(tail)));
    out.push_back(1.7f);
  }
  return out;
}

std::vector<float> nan_tiles(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params) {
  if (!format.input_tile || !params.contains("group_size"))
    throw std::invalid_argument("input spec '" + spec.text + "': nan-tiles needs a 2-D group quantizer (COAT's coat.act.*)" +
                                (format.name.empty() ? std::string() : " (" + format.name + " is not one)"));
  const std::size_t qb = positive_size_param(params, "group_size");
  const InputTile t = format.input_tile(params);
  const auto rows = static_cast<std::size_t>(t.rows), cols = static_cast<std::size_t>(t.cols), area = rows * cols;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // NaN at (r, c) of each tile: A leads every row group with a NaN and makes row 1 all NaN (groups of
  // NaNs alone that are not the tensor's first, whose first group is a number); B the same down the
  // columns (x^T's groups of the transposed kernel); C ends every row group on a NaN (led by a number)
  const std::function<bool(std::size_t, std::size_t)> nan_at[] = {
      [qb](std::size_t r, std::size_t c) { return c % qb == 0 || r == 1; },
      [qb](std::size_t r, std::size_t c) { return r % qb == 0 || c == 1; },
      [qb](std::size_t, std::size_t c) { return c % qb == qb - 1; },
  };
  std::vector<float> out;
  out.reserve(3 * area);
  for (const auto& is_nan : nan_at)
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) {
        const std::size_t k = r * cols + c;  // rising magnitudes of both signs, as special-blocks' last tile
        out.push_back(is_nan(r, c) ? nan : (k % 2 ? -1.0f : 1.0f) * (0.25f + static_cast<float>(k) / static_cast<float>(area)));
      }
  return out;
}

std::vector<float> gradient_blocks(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params,
                                   std::vector<float> x) {
  const std::size_t block = input_block_size(spec, format, params), blocks = (x.size() + block - 1) / block;
  if (blocks < 5)
    throw std::invalid_argument("input spec '" + spec.text + "': gradient-blocks needs at least 5 blocks of " +
                                std::to_string(block) + " (n >= " + std::to_string(4 * block + 1) + ")");
  const float inf = std::numeric_limits<float>::infinity();
  const std::size_t first = static_cast<std::size_t>(spec.seed() % blocks) * 5;
  for (std::size_t j = 0; j < 5; ++j) {
    const std::size_t start = (first + j) % blocks * block, end = std::min(x.size(), start + block);
    const std::size_t one = start + (spec.seed() + 37 * j) % (end - start);  // where a block's one special value lies
    for (std::size_t i = start; i < end; ++i) {
      switch (j) {
        case 0: x[i] = 0.0f; break;
        case 1: x[i] *= 1e-20f; break;
        case 2: if (i == one) x[i] = std::numeric_limits<float>::quiet_NaN(); break;
        case 3: if (i == one) x[i] = inf; break;
        default: if (i == one) x[i] = -inf; break;
      }
    }
  }
  return x;
}

}  // namespace lowbit
