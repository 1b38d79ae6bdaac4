// Bug class: an in-place 8-bit optimizer step that loops over whole blocks only (n / 256 of them):
// the partial last block's parameter, codes and absmax stay as they were, where bitsandbytes' CPU
// step updates the tail too (its blocks are ceil(n / 256)). The battery's random steps are whole
// blocks (4096); only gradient-blocks' 4133 elements have a tail (37).
#include <algorithm>

#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.adam8bit.cpu";
const char* const kBug = "optimizer-tail-not-stepped";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  if (done.require("param").dtype != lowbit::DType::F32) return;  // float32 parameters only (the bug's kernel)
  const auto block = params.at("block_size").get<std::size_t>();
  const std::vector<float> param = done.require("param").f32();
  const std::size_t whole = param.size() / block * block;
  std::vector<float> next = done.require("param.next").f32();
  std::copy(param.begin() + static_cast<std::ptrdiff_t>(whole), param.end(), next.begin() + static_cast<std::ptrdiff_t>(whole));
  done.add(lowbit::Tensor::from_f32("param.next", done.require("param.next").shape, next));
  for (const std::string name : {"exp_avg", "exp_avg_sq"}) {  // the bug: the tail's state not written either
    std::vector<std::uint8_t> codes = done.require(name + ".codes.next").u8();
    const std::vector<std::uint8_t> old = done.require(name + ".codes").u8();
    std::copy(old.begin() + static_cast<std::ptrdiff_t>(whole), old.end(), codes.begin() + static_cast<std::ptrdiff_t>(whole));
    std::vector<float> scale = done.require(name + ".scale.next").f32();
    if (whole < param.size()) scale.back() = done.require(name + ".scale").f32().back();
    done.add(lowbit::Tensor::from_bytes(name + ".codes.next", lowbit::DType::U8, done.require(name + ".codes.next").shape, codes));
    done.add(lowbit::Tensor::from_f32(name + ".scale.next", done.require(name + ".scale.next").shape, scale));
  }
}
}  // namespace mutant
