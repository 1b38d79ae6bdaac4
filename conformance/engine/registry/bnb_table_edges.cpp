#include "bnb_table_edges.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

#include "lowbit/codebook.hpp"
#include "lowbit/float_bits.hpp"

namespace lowbit {

namespace {

// float32 in [-1, 1] as a monotone integer key and back (negative floats count down from 0).
std::int64_t key_of(float y) {
  const std::uint32_t u = bits_of(y);
  return u & 0x80000000u ? -static_cast<std::int64_t>(u & 0x7FFFFFFFu) : static_cast<std::int64_t>(u);
}
float float_of_key(std::int64_t k) {
  return k < 0 ? float_from_bits(0x80000000u | static_cast<std::uint32_t>(-k)) : float_from_bits(static_cast<std::uint32_t>(k));
}

// The smallest float32 y in [-1, 1] with BnbCpuLut::index_of(y) >= cell (index_of is monotone in y).
float first_of_cell(std::uint32_t cell) {
  std::int64_t lo = key_of(-1.0f), hi = key_of(1.0f);  // index_of(1) = 65535 >= every cell
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (codebook::BnbCpuLut::index_of(float_of_key(mid)) >= cell) hi = mid;
    else lo = mid + 1;
  }
  return float_of_key(lo);
}

}  // namespace

std::vector<float> bnb_cpu_table_edges(const std::vector<float>& qmap, std::size_t block_size) {
  const codebook::BnbCpuLut lut(qmap);
  const auto table = lut.table();
  std::vector<float> firsts;  // y_t of every cell around a code change, ascending
  for (std::uint32_t t = 1; t < table.size(); ++t) {
    if (table[t] == table[t - 1]) continue;
    for (std::uint32_t c = t > 1 ? t - 1 : t; c <= t + 1 && c < table.size(); ++c)
      if (firsts.empty() || first_of_cell(c) > firsts.back()) firsts.push_back(first_of_cell(c));
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> out;
  const auto block_of = [&](float absmax, const std::vector<float>& values) {
    for (float x : values) {
      if (!(std::fabs(x) <= absmax)) continue;  // never raise the block's absmax
      if (out.size() % block_size == 0) out.push_back(absmax);
      out.push_back(x);
    }
    while (out.size() % block_size) out.push_back(0.0f);  // the next absmax starts a block of its own
  };
  std::vector<float> values;
  for (float y : firsts)
    for (float v : {std::nextafter(y, -inf), y, std::nextafter(y, inf)}) values.push_back(v);
  block_of(1.0f, values);
  for (float a : kTableEdgeAbsmaxes) {
    values.clear();
    for (float y : firsts) {
      const float x = y * a;
      values.push_back(x);
      float down = x, up = x;
      for (int k = 0; k < 2; ++k) {
        down = std::nextafter(down, -inf);
        up = std::nextafter(up, inf);
        values.push_back(down);
        values.push_back(up);
      }
    }
    block_of(a, values);
  }
  return out;
}

}  // namespace lowbit
