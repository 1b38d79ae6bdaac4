#pragma once
// Binary32 operations for our CUDA kernels and their host twins (device/kernels/), one definition for
// both sides: on the device the explicit round-to-nearest intrinsics (__fdiv_rn, __fmul_rn, __fadd_rn,
// __fmaf_rn), on the host plain / * + and std::fma (the twins are built with -ffp-contract=off, the
// device code with --fmad=false; no fast-math, subnormals kept on both).
//
// The reference runs on x86, whose SSE arithmetic returns a NaN operand's own payload (quieted; the
// first operand's when both are NaN) and makes the negative default NaN 0xFFC00000 for 0 * Inf, Inf / Inf
// and 0 / 0; a GPU returns its canonical 0x7FFFFFFF for all of these. Where the reference stores such a
// result (a scale, a dequantized value) or reads its sign (torch's FP8 NaN code keeps the sign), the
// kernels use the x86 rule written out (mul_x86, div_x86), so that the device gives the reference's bits.
#include <math.h>
#include <stdint.h>
#include <string.h>

// As reference/include/lowbit/host_device.hpp defines it; written here too because some of our kernels
// (the per-block E4M3 plugin and its twins) build, like a kernel author's plugin, against include/ only.
#ifndef LOWBIT_HOST_DEVICE
#if defined(__CUDACC__)
#define LOWBIT_HOST_DEVICE __host__ __device__
#else
#define LOWBIT_HOST_DEVICE
#endif
#endif

namespace lowbit_kernels {

constexpr uint32_t kX86DefaultNan = 0xFFC00000u;  // what SSE makes of an invalid operation

LOWBIT_HOST_DEVICE inline uint32_t bits_of(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
#endif
}

LOWBIT_HOST_DEVICE inline float float_of(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
#endif
}

LOWBIT_HOST_DEVICE inline bool is_nan(float x) { return (bits_of(x) & 0x7FFFFFFFu) > 0x7F800000u; }
LOWBIT_HOST_DEVICE inline float abs_of(float x) { return float_of(bits_of(x) & 0x7FFFFFFFu); }  // std::fabs: NaN payload kept
LOWBIT_HOST_DEVICE inline float quieted(float x) { return float_of(bits_of(x) | 0x00400000u); }

// IEEE binary32, round to nearest even.
LOWBIT_HOST_DEVICE inline float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
LOWBIT_HOST_DEVICE inline float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
LOWBIT_HOST_DEVICE inline float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
LOWBIT_HOST_DEVICE inline float fma_rn(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return fmaf(a, b, c);
#endif
}
LOWBIT_HOST_DEVICE inline float sqrt_rn(float x) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(x);
#else
  return sqrtf(x);
#endif
}

// a * b and a / b as SSE's mulss / divss compute them, NaNs included (see the top of this file).
LOWBIT_HOST_DEVICE inline float mul_x86(float a, float b) {
  if (is_nan(a)) return quieted(a);
  if (is_nan(b)) return quieted(b);
  const float p = mul_rn(a, b);
  return is_nan(p) ? float_of(kX86DefaultNan) : p;
}
LOWBIT_HOST_DEVICE inline float div_x86(float a, float b) {
  if (is_nan(a)) return quieted(a);
  if (is_nan(b)) return quieted(b);
  const float q = div_rn(a, b);
  return is_nan(q) ? float_of(kX86DefaultNan) : q;
}

// One step of a block's absmax that ignores NaN: std::max(m, |v|) is (m < |v|) ? |v| : m, and a NaN
// never compares greater. Also merges two partial maxima (neither NaN) in any order: max is exact.
LOWBIT_HOST_DEVICE inline float amax_step(float m, float v) {
  const float a = abs_of(v);
  return m < a ? a : m;
}

}  // namespace lowbit_kernels
