// Bug class: coat.fake.symm's block (bi, bj) taken as the row_block * col_block consecutive values at
// (bi * blocks across + bj) * area of the row-major input, where block_cut takes the row_block x
// col_block tile at rows bi * row_block.., columns bj * col_block..: the same values only while the
// input is one block across or a block is one row high. Each block's scale, Q and RQ are the reference's
// SymmQuantizer of the values the kernel takes, written back where it took them.
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.fake.symm";
const char* const kBug = "coat-symm-blocks-of-consecutive-values";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using namespace lowbit;
  const Tensor& input = done.require("input");
  const auto m = input.shape[0], n = input.shape[1];
  const auto rb = params.at("row_block").get<std::int64_t>() < 0 ? m : params.at("row_block").get<std::int64_t>();
  const auto cb = params.at("col_block").get<std::int64_t>() < 0 ? n : params.at("col_block").get<std::int64_t>();
  const std::int64_t across = n / cb;
  // tile_of[flat index] = the index in the tiled order at which the reference sees that value
  std::vector<std::size_t> tile_of(static_cast<std::size_t>(m * n));
  for (std::int64_t k = 0; k < m * n; ++k) {
    const std::int64_t block = k / (rb * cb), j = k % (rb * cb);
    tile_of[k] = static_cast<std::size_t>(((block / across) * rb + j / cb) * n + (block % across) * cb + j % cb);
  }
  const std::vector<float> x = input.f32();
  std::vector<float> seen(x.size());
  for (std::size_t k = 0; k < x.size(); ++k) seen[tile_of[k]] = x[k];
  Case as_seen = done;
  as_seen.add(Tensor::from_f32("input", input.shape, seen));
  for (const Tensor& t : find_format(kFormat)->run(as_seen, params, 1)) {
    if (t.name == "scale") {
      done.add(t);
      continue;
    }
    const std::vector<float> v = t.f32();
    std::vector<float> back(v.size());
    for (std::size_t k = 0; k < v.size(); ++k) back[k] = v[tile_of[k]];
    done.add(Tensor::from_f32(t.name, t.shape, back));
  }
}
}  // namespace mutant
