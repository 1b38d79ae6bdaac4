#pragma once
// For the mutants of bitsandbytes' CPU back end (bnb.blockwise8.*): its quantizer written out as
// docs/formats/bnb-blockwise8.md states it (bitsandbytes 0.50 csrc/cpu_ops.cpp build_quantize_lut,
// quantize_cpu_impl, dequantizeBlockwise8bitCpu), each piece a hook that a mutant replaces with its
// bug; the codes, scale and dequant it makes replace the reference's. With no hook replaced it
// makes the reference's bytes (test_verify holds a mutant to passing where its bug cannot show).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "lowbit/case.hpp"
#include "lowbit/codebook.hpp"

namespace mutant {

struct BnbCpuPieces {
  // every input as the kernel reads it (a flush of subnormal inputs)
  std::function<float(float x)> load = [](float x) { return x; };
  // max |x| over the block's valid items, NaN ignored, from 0
  std::function<float(std::span<const float> block)> absmax = [](std::span<const float> b) {
    float a = 0.0f;
    for (float x : b) a = std::fmax(a, std::fabs(x));
    return a;
  };
  // y = x * (1 / absmax)
  std::function<float(float x, float absmax)> normalize = [](float x, float absmax) { return x * (1.0f / absmax); };
  // the cell of y: (uint16) fma((clamp(y, -1, 1) + 1) * 0.5, 65535, 0.5), NaN in cell 0
  std::function<std::uint16_t(float y)> index = [](float y) { return lowbit::codebook::BnbCpuLut::index_of(y); };
  // the qmap the table is built from (the dequant reads the case's own)
  std::function<std::vector<float>(std::vector<float> q)> table_map = [](std::vector<float> q) { return q; };
  // cell t's code: the number of midpoints 0.5 * (q[j] + q[j + 1]) below v_t = -1 + (2 t) / 65535
  std::function<bool(float midpoint, std::uint32_t t)> below = [](float midpoint, std::uint32_t t) {
    return midpoint < -1.0f + (2.0f * static_cast<float>(t)) / 65535.0f;
  };
  // q[code] * absmax
  std::function<float(float q, float absmax)> dequant = [](float q, float absmax) { return q * absmax; };
  // the block size the kernel quantizes with (the case's block_size, unless it ignores it)
  std::function<std::size_t(std::size_t block_size)> block = [](std::size_t b) { return b; };
};

inline std::vector<std::uint8_t> bnb_cpu_table(std::span<const float> q, const BnbCpuPieces& p) {
  std::vector<std::uint8_t> table(65536);
  std::size_t code = 0;
  for (std::uint32_t t = 0; t < 65536; ++t) {
    while (code + 1 < q.size() && p.below(0.5f * (q[code] + q[code + 1]), t)) ++code;
    table[t] = static_cast<std::uint8_t>(code);
  }
  return table;
}

// The case's codes, scale and dequant remade by the pieces (float32 inputs: the battery's).
inline void requantize_bnb_cpu(lowbit::Case& done, const nlohmann::json& params, const BnbCpuPieces& p) {
  using namespace lowbit;
  std::vector<float> x = done.require("input").f32();
  for (float& v : x) v = p.load(v);
  const std::vector<float> q = done.require("qmap").f32();
  const std::vector<std::uint8_t> table = bnb_cpu_table(p.table_map(q), p);
  const std::size_t stored = params.at("block_size").get<std::size_t>(), block = p.block(stored);
  std::vector<std::uint8_t> codes(x.size());
  std::vector<float> dequant(x.size()), absmax_of((x.size() + block - 1) / block);
  for (std::size_t b = 0; b < absmax_of.size(); ++b) {
    const std::size_t start = b * block, end = std::min(x.size(), start + block);
    const float a = absmax_of[b] = p.absmax(std::span<const float>(x).subspan(start, end - start));
    for (std::size_t i = start; i < end; ++i) {
      codes[i] = a == 0.0f ? 0 : table[p.index(p.normalize(x[i], a))];
      dequant[i] = p.dequant(q[codes[i]], a);
    }
  }
  // one scale per stored block: the absmax of the block that holds its first element
  std::vector<float> scale(done.require("scale").element_count());
  for (std::size_t s = 0; s < scale.size(); ++s) scale[s] = absmax_of[std::min(absmax_of.size() - 1, s * stored / block)];
  done.add(Tensor::from_bytes("codes", DType::U8, done.require("codes").shape, codes));
  done.add(Tensor::from_f32("scale", done.require("scale").shape, scale));
  done.add(Tensor::from_f32("dequant", done.require("dequant").shape, dequant));
}

}  // namespace mutant
