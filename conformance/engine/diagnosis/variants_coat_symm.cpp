// The variants of coat.fake.symm's rounding: Q = x / scale rounded to the ExMy grid with ties to even
// (torch.round: COAT's torch fake quantizer, FloatPointQuantizeTorch.py) where the Triton kernel it
// runs rounds half away from zero (libdevice.round), RQ = Q * scale after it. Each block's scale is
// the case's own; only a finite nonzero x / scale is rounded otherwise (the torch quantizer's other
// rules, -0 to +0 and its NaN, are not the tie rule). And its blocks taken as runs of consecutive values.
#include <cmath>

#include "lowbit/coat_fake.hpp"
#include "variants.hpp"

namespace lowbit::diagnosis {

namespace {

// coat.fake.symm with block k taken as the k-th run of `area` consecutive values of the row-major input,
// where block_cut takes row_block x col_block tiles: the reference run on the input with each run
// moved into the tile the case's layout gives block k (its p-th element, in memory order, the run's
// p-th value), its outputs moved back. nullopt where each run is its block already.
std::optional<Case> blocks_of_consecutive_values(const FormatSpec& f, const Case& e, const nlohmann::json& p) {
  const Tensor& input = e.require("input");
  if (input.dtype != DType::F32) return std::nullopt;
  const BlockMap blocks = block_map(e, "rq");
  const std::size_t n = input.element_count();
  if (blocks.blocks == 0 || n % blocks.blocks) return std::nullopt;
  const std::size_t area = n / blocks.blocks;
  std::vector<std::size_t> filled(blocks.blocks, 0), tiled_at(n);  // tiled_at[run position] = its place in the tiles
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = blocks.block_of(i);
    tiled_at[k * area + filled[k]++] = i;
  }
  bool moved = false;
  for (std::size_t j = 0; j < n; ++j) moved = moved || tiled_at[j] != j;
  if (!moved) return std::nullopt;
  const std::vector<float> x = input.f32();
  std::vector<float> seen(n);
  for (std::size_t j = 0; j < n; ++j) seen[tiled_at[j]] = x[j];
  Case as_seen = e;
  as_seen.add(Tensor::from_f32("input", input.shape, seen));
  std::vector<Tensor> outputs;
  for (Tensor& t : f.run(as_seen, p, 1)) {
    if (t.name == "rq" || t.name == "q") {
      const std::vector<float> v = t.f32();
      std::vector<float> back(n);
      for (std::size_t j = 0; j < n; ++j) back[j] = v[tiled_at[j]];
      t = Tensor::from_f32(t.name, t.shape, back);
    }
    outputs.push_back(std::move(t));
  }
  return with_outputs(e, std::move(outputs));
}

}  // namespace

void add_coat_symm_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  if (f.name != "coat.fake.symm") return;
  const FormatSpec* spec = &f;
  out.push_back({"blocks-of-consecutive-values",
                 "the reference with each block taken as row_block * col_block consecutive values of the row-major "
                 "input, where block_cut takes row_block x col_block tiles",
                 [spec](const Case& e, const nlohmann::json& p) { return blocks_of_consecutive_values(*spec, e, p); }});
  out.push_back({"ties-even",
                 "the reference with Q rounded to the grid with ties to even (torch.round, COAT's torch fake quantizer) "
                 "where COAT's Triton kernel rounds half away from zero",
                 [](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                   const fp8::FormatId id = fp8::format_from_param(p.at("fp8").get<std::string>(), "fp8");
                   const Tensor& input = e.require("input");
                   if (input.dtype != DType::F32) return std::nullopt;
                   const std::vector<float> x = input.f32(), scale = e.require("scale").f32();
                   std::vector<float> q = e.require("q").f32(), rq = e.require("rq").f32();
                   const BlockMap blocks = block_map(e, "rq");
                   if (scale.size() != blocks.blocks || q.size() != x.size()) return std::nullopt;
                   for (std::size_t i = 0; i < x.size(); ++i) {
                     const float s = scale[blocks.block_of(i)];
                     const float y = x[i] / s;
                     if (std::isfinite(s) && std::isfinite(y) && y != 0.0f) {
                       q[i] = coat_fake::floatexmy_torch(y, id);
                       rq[i] = q[i] * s;
                     }
                   }
                   return with_outputs(e, {Tensor::from_f32("rq", input.shape, rq), Tensor::from_f32("q", input.shape, q)});
                 }});
}

}  // namespace lowbit::diagnosis
