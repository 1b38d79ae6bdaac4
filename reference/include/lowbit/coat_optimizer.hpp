#pragma once
// COAT's FP8 AdamW optimizer states (NVlabs/COAT coat/optimizer/kernels), as the official CUDA
// kernels compute them (NVlabs/COAT 80ec99f fp8_adamw_cuda_kernel.cu, fp8_adamw_expand_cuda_kernel.cu
// and their nvcc 13.0 PTX): groups of 128 consecutive elements, E4M3 codes with a
// per-group scale, and with Dynamic Range Expansion a per-group exponent k and centre c.
// docs/formats/coat-optimizer.md states the arithmetic and every quirk.
#include <cstdint>
#include <span>
#include <vector>

namespace lowbit::coat {

inline constexpr std::size_t kGroup = 128;  // qgroup_size: the launchers assert it

// One moment: an E4M3 code per element and per-group float32 statistics. expand (k) and centre (c)
// are used by the expansion kernel only (its fresh state holds ones there; codes and scale zeros).
struct Moment {
  std::vector<std::uint8_t> codes;
  std::vector<float> scale, expand, centre;
};
Moment fresh_moment(std::size_t n, bool expansion);

// Hyperparameters as the kernels receive them: pybind11 rounds the Python floats to float32 once.
struct Hyper {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 1e-2f;
  int expand_min = 16;
};

// The group maximum and minimum of |values| exactly as the expansion kernel's shuffle tree
// (warp shuffles 16..1, then lanes 0-3 of warp 0 over the 4 warp results, lanes 4-31 holding max 0
// and min 1e9) computes them: NaN ignored by the max; the min skips an *incoming* zero or NaN only,
// so a zero at lane 0 forces 0 and zeros elsewhere hide their subtree; capped at 1e9; padding lanes
// (values.size() < 128) hold max 0, min FLT_MAX.
struct GroupStats {
  float max, min;
};
// Reference: COAT 80ec99f coat/optimizer/kernels/fp8_adamw_expand_cuda_kernel.cu, lines 71-146.
GroupStats expand_group_stats(std::span<const float> values);
// Reference: COAT 80ec99f coat/optimizer/kernels/fp8_adamw_cuda_kernel.cu, lines 64-97 (max only).
float origin_group_max(std::span<const float> values);

// One quantized group: codes plus the group's stored statistics.
struct QuantizedGroup {
  std::vector<std::uint8_t> codes;
  float scale = 0, expand = 1, centre = 1;
};
// Reference: COAT 80ec99f fp8_adamw_cuda_kernel.cu lines 101-124: s = RN(f32(double(max) + 1e-20) / 448),
// codes = e4m3 satfinite(RN(x / s)). The kernel's shared-memory race (the 1e-20 added up to 4 times)
// is modelled as one addition; it only matters for max < 2^-42 (origin_race_sensitive).
QuantizedGroup origin_quantize_group(std::span<const float> values);
bool origin_race_sensitive(float group_max);
// How the expansion kernel forms a group's minimum, k and centre: the kernel's (the default), or one of
// the known departures from it that the diagnosis of a failing kernel tries (docs/verifying-a-kernel.md).
struct ExpandRule {
  // false: k = log2f(100352) / log2f(R) as it comes (the README's unrounded k), not floored to 1/E
  bool floor_k = true;
  // true: c = sqrt(A B), the kernel's centre before COAT 715c162 ("fix numerical issue of FP8 Optimizer
  // States": b8f6be3 fp8_adamw_expand_cuda_kernel.cu line 149), where it now computes sqrt(A) sqrt(B)
  bool centre_of_product = false;
  // true: the group minimum is the smallest nonzero |x| (capped at 1e9), as a plain loop finds it, where
  // the kernel's shuffle tree misses what a zero hides (docs/formats/coat-optimizer.md "Zeros hide subtrees")
  bool exact_min = false;
  // true: lanes 4-31 of warp 0 hold FLT_MAX in the block-level minimum, where the kernel's 1e9 caps it
  bool fill_flt_max = false;
  // true: k = 1 where log2f(R) is 0 (R == 1: one magnitude), where the kernel divides by it (+inf)
  bool unit_ratio_k_one = false;
  // true: log2f(R) computed as log2f(A) - log2f(B)
  bool log_difference = false;
};
// expand_group_stats under a rule's minimum (exact_min, fill_flt_max); the kernel's for the default rule.
GroupStats expand_group_stats(std::span<const float> values, const ExpandRule& rule);

// Reference: COAT 80ec99f fp8_adamw_expand_cuda_kernel.cu lines 148-201: A, B = max, min + 1e-30 (in
// double), R = A / B, c = sqrt(A) sqrt(B), k = floor(log2f(100352) / log2f(R) * E) / E, codes =
// e4m3(sign(x) powf(|x| / c, k) / s) with s = powf(A / c, k) / 448; `second` drops the sign.
QuantizedGroup expand_quantize_group(std::span<const float> values, int expand_min, bool second,
                                     const ExpandRule& rule = {});
// The value the expansion kernel casts to E4M3 for x, given its group's k, c and s:
// RN(sign(x) powf(RN(|x| / c), k) / s) (second moment: powf(RN(x / c), k) / s).
float expand_prequantized(float x, const QuantizedGroup& group, bool second);

// Reference: COAT 80ec99f fp8_adamw_cuda_kernel.cu line 40: float(code) * scale.
float origin_dequantize(std::uint8_t code, float scale);
// Reference: COAT 80ec99f fp8_adamw_expand_cuda_kernel.cu lines 42-49: d = float(code) * s, then
// sign(d) powf(|d|, 1/k) * c (first moment; the second has no sign handling).
float expand_dequantize(std::uint8_t code, float scale, float expand, float centre, bool second);

// Reference: COAT 80ec99f fp8_adamw_cuda_kernel.cu (expansion = false) and
// fp8_adamw_expand_cuda_kernel.cu (true), one launch: dequantize, m = fma(m0, b1, (1-b1) g),
// v = fma(v0, b2, g ((1-b2) g)), c1 = 1 - powf(b1, step), c2 = sqrt(1 - powf(b2, step)),
// denom = ((sqrt(v) / c2) + eps) c1, u = fma(p, wd, m / denom), p = fma(-u, lr, p), then requantize
// each group of 128. `step` is the int the optimizer passes (its float32 counter, after += 1).
// `rule` changes the expansion's k or centre (ExpandRule), for the diagnosis only.
void adamw_step(std::span<float> param, std::span<const float> grad, int step, Moment& exp_avg, Moment& exp_avg_sq,
                const Hyper& h, bool expansion, const ExpandRule& rule = {});

}  // namespace lowbit::coat
