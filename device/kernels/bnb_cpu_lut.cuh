#pragma once
// bitsandbytes' block-wise 8-bit quantization as its CPU back end computes it (bnb.blockwise8.dynamic
// and .linear with backend "cpu", the formats' default), per element, for our CUDA kernels
// (blockwise_plugin.cu) and their host twin (blockwise_host_twin.cpp).
//
// Reference: bitsandbytes >= 0.49 (PR #1901) csrc/cpu_ops.cpp build_quantize_lut / quantize_cpu_impl
// (the reference's codebook::BnbCpuLut and blockwise::bnb_quantize with BnbBackend::CpuLut): absmax
// ignoring NaN, y = x * (1 / absmax), code = table[round((clamp(y) + 1) / 2 * 65535)], where the
// 65536-entry table holds, for v_i = -1 + 2i / 65535, the scan's code: it advances over the midpoints
// m_c = 0.5 * (q[c] + q[c+1]) while m_c < v_i.
//
// The kernels do not build the 64 KiB table. Because v_i never decreases with i, table[i] is the first
// c with !(m_c < v_i), which is the first c whose prefix maximum P_c = max(m_0..m_c) (a NaN counting as
// +Inf) reaches v_i; P is sorted, so table[i] = #{c : P_c < v_i} = #{c : first_index(P_c) <= i}, where
// first_index(P) is the smallest i with P < v_i (65536 if none). The 255 first indices come from the
// qmap once per case (a binary search over i each, with the table's own v_i); each element then counts
// them with 8 steps of a branchless search. conformance/tests/test_verify.cpp holds code_of_index against the
// reference's table on all 65 536 indices for several maps, unsorted and NaN-holding ones included.
#include "ieee_ops.cuh"

namespace lowbit_kernels::bnb {

constexpr uint32_t kMidpoints = 255;  // a 256-entry qmap
constexpr uint32_t kTableSize = 65536;

// The table's v_i = -1 + (2 * i) / 65535, in binary32 as build_quantize_lut computes it.
LOWBIT_HOST_DEVICE inline float table_value(uint32_t i) {
  return add_rn(-1.0f, div_rn(mul_rn(2.0f, static_cast<float>(i)), 65535.0f));
}

// m_c = 0.5 * (q[c] + q[c+1]).
LOWBIT_HOST_DEVICE inline float midpoint(float lo, float hi) { return mul_rn(0.5f, add_rn(lo, hi)); }

// One step of the prefix maximum P_c = max(P_{c-1}, m_c), a NaN midpoint counting as +Inf (the scan
// stops at it: a NaN never compares below v). P_{-1} is -Inf.
LOWBIT_HOST_DEVICE inline float prefix_step(float previous, float m) {
  if (is_nan(m)) return float_of(0x7F800000u);
  return previous < m ? m : previous;
}

// The smallest i in [0, 65536) with P < v_i, or 65536.
LOWBIT_HOST_DEVICE inline uint32_t first_index(float p) {
  uint32_t lo = 0, hi = kTableSize;  // the answer is in [lo, hi]
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (p < table_value(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// table[i]: how many of the 255 sorted first indices are <= i.
LOWBIT_HOST_DEVICE inline uint8_t code_of_index(uint32_t i, const uint32_t* first) {
  uint32_t count = 0;
  for (uint32_t step = 128; step >= 1; step /= 2)
    if (count + step <= kMidpoints && first[count + step - 1] <= i) count += step;
  return static_cast<uint8_t>(count);
}

// The table index of y: NaN -> 0 (x86 converts a NaN to index 0), else clamp to [-1, 1] and
// fma((y + 1) * 0.5, 65535, 0.5) truncated (GCC contracts the last multiply-add in cpu_ops.cpp).
LOWBIT_HOST_DEVICE inline uint32_t index_of(float y) {
  if (is_nan(y)) return 0;
  const float c = y < -1.0f ? -1.0f : (1.0f < y ? 1.0f : y);
  return static_cast<uint32_t>(fma_rn(mul_rn(add_rn(c, 1.0f), 0.5f), 65535.0f, 0.5f));
}

// 1 / absmax (absmax is never NaN: it ignores NaN; 0 is handled by the caller: the block's codes stay 0).
LOWBIT_HOST_DEVICE inline float reciprocal(float absmax) { return div_rn(1.0f, absmax); }

// One element's code: y = x * (1 / absmax); an all-zero block (absmax 0) has codes 0.
LOWBIT_HOST_DEVICE inline uint8_t code(float x, float absmax, float inverse, const uint32_t* first) {
  if (absmax == 0.0f) return 0;
  return code_of_index(index_of(mul_rn(x, inverse)), first);
}

// Reference: bitsandbytes 0.50 csrc/cpu_ops.cpp dequantizeBlockwise8bitCpu: qmap[code] * absmax.
LOWBIT_HOST_DEVICE inline float dequant(uint8_t c, float absmax, const float* q) { return mul_x86(q[c], absmax); }

}  // namespace lowbit_kernels::bnb
