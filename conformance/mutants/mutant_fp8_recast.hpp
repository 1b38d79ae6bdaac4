#pragma once
// For FP8 cast mutants: the case's codes and dequant recomputed from its input with another policy or
// rounding rule (the bug), the way fp8.<format>.<overflow> computes them otherwise.
#include "lowbit/case.hpp"
#include "lowbit/fp8.hpp"

namespace mutant {

template <class Format, class Encode>
void recast(lowbit::Case& done, Encode encode) {
  const lowbit::Tensor& input = done.require("input");
  const lowbit::Tensor& old = done.require("codes");
  const std::vector<std::uint8_t> old_codes = old.u8();
  const std::vector<float> old_dequant = done.require("dequant").f32();
  std::vector<std::uint8_t> codes(input.element_count());
  std::vector<float> dequant(codes.size());
  for (std::size_t i = 0; i < codes.size(); ++i) {
    codes[i] = encode(input.value_as_float(i));
    // a code the bug leaves alone keeps the reference's value (its NaN widening included)
    dequant[i] = codes[i] == old_codes[i] ? old_dequant[i] : lowbit::fp8::decode<Format>(codes[i]);
  }
  const std::vector<std::int64_t> shape = old.shape;
  const lowbit::DType dtype = old.dtype;
  done.add(lowbit::Tensor::from_bytes("codes", dtype, shape, codes));
  done.add(lowbit::Tensor::from_f32("dequant", shape, dequant));
}

}  // namespace mutant
