#pragma once
// The table of vector kernels the fast paths call (fast_kernels.hpp), one per instruction set,
// chosen once per process from what the CPU has (fast_ops.cpp). Private to the arithmetic library.
#include <cstddef>
#include <cstdint>

#include "lowbit/optimizer.hpp"  // the steps' scalar structs
#include "lowbit/optimizer_bnb_rules.hpp"

namespace lowbit::fast {

// The codes an FP8 encoder gives the special inputs under a Policy, sign aside (fp8.hpp
// overflow_code, the Inf branch of encode_with, nan_code): computed by the scalar encoder once per
// call, so that the kernels repeat no policy logic.
struct EncodeConstants {
  std::int32_t overflow;       // a finite value past the largest: | sign
  std::int32_t inf;            // +-Inf: | sign
  std::int32_t nan;            // a NaN input: | (sign & nan_sign_mask)
  std::int32_t nan_sign_mask;  // 0x80 where the policy keeps a NaN's sign, else 0
};

struct AbsMax {
  float max;     // the largest |x| that is not NaN; +0 when there is none
  bool has_nan;
};

// The bucket table of torchao's search over a codebook: one int32 per bucket of binary32 patterns
// (the pattern >> kBucketShift), saying what every y of the bucket shares: the bracket c the search
// reaches before its last step (bits 0-7, valid where kBracketKnown), and the code (bits 8-15, valid
// where kCodeKnown). Built by blockwise.cpp from the scalar search at the bucket's two ends.
constexpr int kBucketShift = 12;
constexpr std::int32_t kBucketMask = (1 << (32 - kBucketShift)) - 1;
constexpr std::int32_t kBracketKnown = 1 << 16;
constexpr std::int32_t kCodeKnown = 1 << 17;

struct Ops {
  const char* name;
  // codes[i] = encode(x[i]) (the divisor is not used) or encode(x[i] / divisor) (_divided)
  void (*encode_e4m3)(const float* x, float divisor, std::uint8_t* codes, std::size_t n, const EncodeConstants& k);
  void (*encode_e5m2)(const float* x, float divisor, std::uint8_t* codes, std::size_t n, const EncodeConstants& k);
  void (*encode_e4m3_divided)(const float* x, float divisor, std::uint8_t* codes, std::size_t n, const EncodeConstants& k);
  // codes[i] = the top byte of x[i]'s bits, by the encoders' loop with no arithmetic (a benchmark's
  // memory floor; divisor and k are not used)
  void (*top_bytes)(const float* x, float divisor, std::uint8_t* codes, std::size_t n, const EncodeConstants& k);
  // out[i] = the float32 with bits in[i] << 24 (the dequantizers' memory floor: read a byte, write
  // float32, no arithmetic)
  void (*widen_bytes)(const std::uint8_t* in, float* out, std::size_t n);
  // codes[i] = torchao_search(x[i] / divisor, q) for a table of 16 or 256 entries
  void (*torchao_search16)(const float* x, float divisor, const float* q, std::uint8_t* codes, std::size_t n);
  void (*torchao_search256)(const float* x, float divisor, const float* q, std::uint8_t* codes, std::size_t n);
  // the same with the bucket table (kBucketShift)
  void (*torchao_search16_table)(const float* x, float divisor, const float* q, const std::int32_t* buckets,
                                 std::uint8_t* codes, std::size_t n);
  void (*torchao_search256_table)(const float* x, float divisor, const float* q, const std::int32_t* buckets,
                                  std::uint8_t* codes, std::size_t n);
  // codes[i] = table[BnbCpuLut::index_of(x[i] * inv)] for bitsandbytes' 65 536-entry table
  void (*bnb_lut)(const float* x, float inv, const std::uint8_t* table, std::uint8_t* codes, std::size_t n);
  AbsMax (*abs_max)(const float* x, std::size_t n);
  // The optimizers' element updates over n elements (optimizer.hpp torchao_adam_element and
  // bnb_adam_cpu_element with correctly rounded roots), in place: param holds the parameter (widened)
  // and comes back as the float32 result before any write-back rounding; m, v (and v_max for AMSGrad,
  // or null) hold the dequantized old moments and come back as the new unquantized ones.
  void (*torchao_adam)(float* param, const float* grad, float* m, float* v, float* v_max, std::size_t n,
                       const optimizer::TorchaoAdamScalars& s);
  void (*bnb_adam)(float* param, const float* grad, float* m, float* v, std::size_t n, const optimizer::BnbAdamScalars& s);
  // bitsandbytes' other CPU rules (optimizer_bnb_rules.hpp bnb_rule_cpu_element and
  // bnb_ademamix_cpu_element with torch's sqrt, correctly rounded), in place as bnb_adam: the states
  // hold the dequantized old values and come back as the new unquantized ones
  void (*bnb_rule)(optimizer::BnbRule rule, float* param, const float* grad, float* state, std::size_t n,
                   std::int64_t step, const optimizer::BnbRuleScalars& s);
  void (*bnb_ademamix)(float* param, const float* grad, float* m1, float* m2, float* nu, std::size_t n,
                       const optimizer::BnbAdemamixScalars& s);
};

// The kernels of one instruction set: SSE2 (every x86-64), AVX2 with FMA3 (null where not built).
const Ops* ops_sse2();
const Ops* ops_avx2();

// The table in use: AVX2 + FMA3 where the CPU has them, else SSE2; simd::set_level changes it.
const Ops& ops();

}  // namespace lowbit::fast
