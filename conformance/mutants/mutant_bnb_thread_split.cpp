// Bug class: a kernel that splits its elements, not its blocks, over two threads, and only above a
// size (2^20 elements, where it starts threads): the split at (n / 2) rounded down to a multiple of 64
// cuts the block that holds it in two, each thread coding its part as a partial block with that
// part's own absmax; the stored absmax is the second part's (its thread writes last), the dequant
// made from it. bitsandbytes' CPU library splits its blocks over OpenMP threads, each block whole: only
// the battery's input of 2^20 + 1000 elements shows the bug (at block size 4096 the split, 524 736,
// falls inside block 128).
#include <algorithm>
#include <utility>

#include "mutant_bnb_cpu.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "threads-split-mid-block";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using namespace lowbit;
  const std::vector<float> x = done.require("input").f32(), q = done.require("qmap").f32();
  const std::size_t n = x.size(), block = params.at("block_size").get<std::size_t>();
  if (n < (std::size_t{1} << 20)) return;  // one thread: the reference's bytes
  const std::size_t mid = (n / 2) & ~std::size_t{63}, b = mid / block, start = b * block, end = std::min(n, start + block);
  if (start == mid) return;  // the split on a block boundary: right
  const BnbCpuPieces p;
  const std::vector<std::uint8_t> table = bnb_cpu_table(q, p);
  std::vector<std::uint8_t> codes = done.require("codes").u8();
  std::vector<float> scale = done.require("scale").f32(), dequant = done.require("dequant").f32();
  float a = 0.0f;
  for (const auto& [from, to] : {std::pair{start, mid}, std::pair{mid, end}}) {
    a = p.absmax(std::span<const float>(x).subspan(from, to - from));
    for (std::size_t i = from; i < to; ++i) codes[i] = a == 0.0f ? 0 : table[p.index(p.normalize(x[i], a))];
  }
  scale[b] = a;
  for (std::size_t i = start; i < end; ++i) dequant[i] = p.dequant(q[codes[i]], a);
  done.add(Tensor::from_bytes("codes", DType::U8, done.require("codes").shape, codes));
  done.add(Tensor::from_f32("scale", done.require("scale").shape, scale));
  done.add(Tensor::from_f32("dequant", done.require("dequant").shape, dequant));
}
}  // namespace mutant
