#pragma once
// torch's CPU float32 operations as bitsandbytes' CPU optimizer back end calls them, one element:
// the pieces of optimizer_bnb_rules.cpp's elements, public so that the diagnosis's variants of those
// rules (conformance/engine/diagnosis/variants_optimizer.cpp) compute as the reference does.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace lowbit::optimizer::torch_cpu {

// Reference: torch 2.15 aten/src/ATen/native/ufunc/add.h, a + b where both may be NaN: x86
// returns the first operand's NaN (quieted), but the compiler may encode a float addition either way
// round; the step's NaN payloads are fixed as the source writes the operands (torch's
// `self + alpha * other`), so that the fast kernels can match them
inline float plus(float a, float b) {
  return std::isnan(a) && std::isnan(b) ? std::bit_cast<float>(std::bit_cast<std::uint32_t>(a) | 0x00400000u) : a + b;
}

// Reference: torch 2.15 aten/src/ATen/native/ufunc/add.h, add(self, other, alpha) on float32:
// fmadd(other, alpha, self) in the vectorized kernels (built with FMA), self + alpha * other in the
// scalar ones
inline float add_alpha(float self, float other, float alpha, bool fused) {
  return fused ? std::fma(other, alpha, self) : plus(self, alpha * other);
}

// Reference: torch 2.15 aten/src/ATen/native/cpu/PointwiseOpsKernel.cpp addcmul(self, t1, t2, value):
// self + value * t1 * t2, the last multiply-add contracted to one fma in the vectorized kernels (as
// bnb_adam_cpu_element's v)
inline float addcmul(float self, float t1, float t2, float value, bool fused) {
  return fused ? std::fma(value * t1, t2, self) : plus(self, (value * t1) * t2);
}

// Reference: torch 2.15 aten/src/ATen/native/cpu/UnaryOpsKernel.cpp sign on float32: (0 < a) - (a < 0)
// (vectorized as two blends): +0 for either zero and for NaN (both comparisons false)
inline float sign(float a) { return static_cast<float>((0.0f < a) - (a < 0.0f)); }

// Reference: torch 2.15 aten/src/ATen/native/cpu/UnaryOpsKernel.cpp sqrt (MKL VML at every capability) as far as the
// golden cases and a direct probe show: a NaN input comes back unchanged, a negative input or -Inf gives +qNaN
// 0x7FC00000 (x86's sqrtss would give the negative default NaN 0xFFC00000). A signed-map state (RMSprop, Adagrad)
// dequantizes to -Inf once its absmax is Inf. Moved by `ulps` floats: the explainer's other faithful
// root (0: correctly rounded).
inline float sqrt(float x, int ulps = 0) {
  if (x < 0.0f) return std::bit_cast<float>(0x7FC00000u);
  float r = std::sqrt(x);
  for (int k = 0; k < std::abs(ulps); ++k) r = std::nextafter(r, ulps > 0 ? INFINITY : -INFINITY);
  return r;
}

}  // namespace lowbit::optimizer::torch_cpu
