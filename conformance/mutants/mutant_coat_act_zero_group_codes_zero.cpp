// Bug class: every code of a group whose absmax is 0 written 0x00 (the division skipped, as
// fp8.perblock.e4m3 does for a zero block), where COAT divides each element by the floor's scale
// 1e-10 / 448 and -0.0 keeps its sign (0x80). A zero group of +0.0 alone (the padding of the fixed
// lists) is 0x00 either way, and a tiny absmax is not 0, so only a group holding -0.0 and no number
// (special-blocks) shows it.
#include <cmath>

#include "lowbit/coat_activation.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.act.pergroup";
const char* const kBug = "coat-act-zero-group-codes-zero";

void mutate(lowbit::Case& done, const nlohmann::json&) {
  using namespace lowbit;
  const Tensor& input = done.require("input");
  const BlockMap groups = block_map(done, "codes");
  std::vector<float> amax(groups.blocks, NAN);
  for (std::size_t i = 0; i < input.element_count(); ++i)
    amax[groups.block_of(i)] = coat_act::absmax_step(amax[groups.block_of(i)], input.value_as_float(i));
  const Tensor& old = done.require("codes");
  std::vector<std::uint8_t> codes = old.u8();
  for (std::size_t i = 0; i < codes.size(); ++i)
    if (amax[groups.block_of(i)] == 0.0f) codes[i] = 0x00;
  done.add(Tensor::from_bytes("codes", old.dtype, old.shape, codes));
}
}  // namespace mutant
