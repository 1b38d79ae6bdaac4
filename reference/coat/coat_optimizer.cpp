// COAT's FP8 AdamW kernels on the CPU (docs/formats/coat-optimizer.md). Every binary32 operation is written
// out in the kernel's order; std::fma stands exactly where nvcc and ptxas fuse
// (docs/formats/coat-optimizer.md#fused-multiply-adds), nowhere else.
#include "lowbit/coat_optimizer.hpp"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <stdexcept>

#include "lowbit/cuda_libdevice.hpp"
#include "lowbit/fp8.hpp"

namespace lowbit::coat {

namespace {

using cuda::canonical;
// The kernels' own constants, written as they write them (fp8_adamw_expand_cuda_kernel.cu fp8MaxVal,
// ratioUpperBound): E4M3's largest finite value, and its square halved.
constexpr float kFp8Max = 448.0f;
static_assert(kFp8Max == fp8::E4M3FN::max_value);
constexpr float kRatioUpperBound = 100352.0f;
static_assert(kRatioUpperBound == kFp8Max * kFp8Max / 2);
constexpr float kBlockFillMin = 1e9f;          // what lanes 4-31 of warp 0 hold in the block-level min

// (float)((double)x + c): the kernels add their QUANT_MIN_VAL in double, then round once.
float add_in_double(float x, double c) { return static_cast<float>(static_cast<double>(x) + c); }

std::uint8_t e4m3(float x) { return fp8::encode_nearest_even<fp8::E4M3FN>(x, fp8::cuda_satfinite()); }

// CUDA decodes an E4M3 code exactly (through f16); its NaN becomes the GPU's canonical NaN once
// arithmetic touches it, which every use here does.
float decode(std::uint8_t code) { return canonical(fp8::decode<fp8::E4M3FN>(code)); }

// sg = +1 when the sign bit is clear (-0 gives -1); the kernel tests the bit, not the value.
float sign_of(float x) { return std::signbit(x) ? -1.0f : 1.0f; }

// One warp's __shfl_down tree over 32 lanes: lane l receives lane l + offset's current value (its
// own when l + offset >= 32); every lane updates at once.
template <typename Combine>
void warp_tree(std::array<float, 32>& lane, Combine combine) {
  for (int offset = 16; offset >= 1; offset /= 2) {
    const std::array<float, 32> before = lane;
    for (int l = 0; l < 32; ++l) lane[l] = combine(before[l], before[l + offset < 32 ? l + offset : l]);
  }
}

float combine_max(float acc, float received) { return std::fmax(acc, std::fabs(received)); }
// setp.leu |r|, 0 skips an incoming zero or NaN; the lane's own value is never tested
float combine_min(float acc, float received) {
  return std::fabs(received) > 0.0f ? std::fmin(acc, std::fabs(received)) : acc;
}

// Both levels of the block reduction: 4 warps, then lanes 0-3 of warp 0 over the warp results.
float block_tree(std::span<const float> values, float pad, float fill, float (*combine)(float, float),
                 bool absolute_own) {
  std::array<float, 4> warp_result{};
  for (std::size_t w = 0; w < 4; ++w) {
    std::array<float, 32> lane{};
    for (std::size_t l = 0; l < 32; ++l) {
      const std::size_t i = w * 32 + l;
      lane[l] = i < values.size() ? (absolute_own ? std::fabs(values[i]) : values[i]) : pad;
    }
    warp_tree(lane, combine);
    warp_result[w] = lane[0];
  }
  std::array<float, 32> lane;
  lane.fill(fill);
  for (std::size_t w = 0; w < 4; ++w) lane[w] = warp_result[w];
  warp_tree(lane, combine);
  return lane[0];
}

void check_group(std::span<const float> values) {
  if (values.empty() || values.size() > kGroup) throw std::invalid_argument("a COAT group holds 1 to 128 elements");
}

}  // namespace

Moment fresh_moment(std::size_t n, bool expansion) {
  const std::size_t groups = (n + kGroup - 1) / kGroup;
  Moment m;
  m.codes.assign(n, 0);
  m.scale.assign(groups, 0.0f);
  if (expansion) {
    m.expand.assign(groups, 1.0f);
    m.centre.assign(groups, 1.0f);
  }
  return m;
}

GroupStats expand_group_stats(std::span<const float> values) { return expand_group_stats(values, ExpandRule{}); }

// Reference: COAT 80ec99f fp8_adamw_expand_cuda_kernel.cu lines 71-146 (exact_min: a plain loop instead).
GroupStats expand_group_stats(std::span<const float> values, const ExpandRule& rule) {
  check_group(values);
  const float max = block_tree(values, 0.0f, 0.0f, combine_max, true);
  if (rule.exact_min) {
    float min = kBlockFillMin;
    for (float x : values) min = combine_min(min, x);
    return {max, min};
  }
  // padding threads: max 0, min FLT_MAX; warp 0's lanes 4-31 at block level: max 0, min 1e9
  return {max, block_tree(values, FLT_MAX, rule.fill_flt_max ? FLT_MAX : kBlockFillMin, combine_min, true)};
}

float origin_group_max(std::span<const float> values) {
  check_group(values);
  return block_tree(values, 0.0f, 0.0f, combine_max, true);
}

bool origin_race_sensitive(float group_max) { return add_in_double(group_max, 1e-20) != group_max; }

QuantizedGroup origin_quantize_group(std::span<const float> values) {
  const float a = add_in_double(origin_group_max(values), 1e-20);
  QuantizedGroup q;
  q.scale = a / kFp8Max;
  q.codes.reserve(values.size());
  for (float x : values) q.codes.push_back(e4m3(x / q.scale));
  return q;
}

QuantizedGroup expand_quantize_group(std::span<const float> values, int expand_min, bool second, const ExpandRule& rule) {
  const GroupStats st = expand_group_stats(values, rule);
  const float a = add_in_double(st.max, 1e-30), b = add_in_double(st.min, 1e-30);
  const float ratio = a / b;
  QuantizedGroup q;
  q.centre = rule.centre_of_product ? std::sqrt(a * b) : std::sqrt(a) * std::sqrt(b);
  const auto e = static_cast<float>(expand_min);
  const float log_ratio = rule.log_difference ? cuda::log2f(a) - cuda::log2f(b) : cuda::log2f(ratio);
  const float k = cuda::log2f(kRatioUpperBound) / log_ratio;
  q.expand = canonical(rule.floor_k ? std::floor(k * e) / e : k);
  if (rule.unit_ratio_k_one && log_ratio == 0.0f) q.expand = 1.0f;
  q.scale = canonical(cuda::powf(canonical(a / q.centre), q.expand) / kFp8Max);
  q.codes.reserve(values.size());
  for (float x : values) q.codes.push_back(e4m3(expand_prequantized(x, q, second)));
  return q;
}

float expand_prequantized(float x, const QuantizedGroup& q, bool second) {
  const float t = second ? cuda::powf(canonical(x / q.centre), q.expand)
                         : sign_of(x) * cuda::powf(canonical(std::fabs(x) / q.centre), q.expand);
  return canonical(canonical(t) / q.scale);
}

float origin_dequantize(std::uint8_t code, float scale) { return canonical(decode(code) * scale); }

float expand_dequantize(std::uint8_t code, float scale, float expand, float centre, bool second) {
  const float d = canonical(decode(code) * scale);
  const float inverse_k = 1.0f / expand;
  if (second) return canonical(cuda::powf(d, inverse_k) * centre);
  return canonical(canonical(sign_of(d) * cuda::powf(std::fabs(d), inverse_k)) * centre);
}

void adamw_step(std::span<float> param, std::span<const float> grad, int step, Moment& m, Moment& v, const Hyper& h,
                bool expansion, const ExpandRule& rule) {
  const std::size_t n = param.size(), groups = (n + kGroup - 1) / kGroup;
  if (grad.size() != n || m.codes.size() != n || v.codes.size() != n)
    throw std::invalid_argument("coat adamw_step: param, grad and state sizes differ");
  for (const Moment* s : {&m, &v}) {
    if (s->scale.size() != groups || (expansion && (s->expand.size() != groups || s->centre.size() != groups)))
      throw std::invalid_argument("coat adamw_step: each state needs one scale (and k, c with expansion) per 128 elements");
  }
  const float w1 = 1.0f - h.beta1, w2 = 1.0f - h.beta2;  // float, exact for beta >= 0.5
  const auto fstep = static_cast<float>(step);
  const float c1 = 1.0f - cuda::powf(h.beta1, fstep);
  const float c2 = std::sqrt(1.0f - cuda::powf(h.beta2, fstep));
  std::vector<float> m_new(n), v_new(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t g = i / kGroup;
    const float m0 = expansion ? expand_dequantize(m.codes[i], m.scale[g], m.expand[g], m.centre[g], false)
                               : origin_dequantize(m.codes[i], m.scale[g]);
    const float v0 = expansion ? expand_dequantize(v.codes[i], v.scale[g], v.expand[g], v.centre[g], true)
                               : origin_dequantize(v.codes[i], v.scale[g]);
    const float gi = grad[i], p = param[i];
    const float mi = canonical(std::fma(m0, h.beta1, w1 * gi));
    const float vi = canonical(std::fma(v0, h.beta2, gi * (w2 * gi)));
    const float denom = ((std::sqrt(vi) / c2) + h.eps) * c1;
    const float u = std::fma(p, h.weight_decay, mi / denom);
    param[i] = canonical(std::fma(-u, h.lr, p));  // ptxas fuses p - lr * u
    m_new[i] = mi;
    v_new[i] = vi;
  }
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t begin = g * kGroup, count = std::min(kGroup, n - begin);
    struct Target {
      Moment* state;
      const std::vector<float>* values;
      bool second;  // the second moment: no sign handling
    };
    for (const Target& t : {Target{&m, &m_new, false}, Target{&v, &v_new, true}}) {
      Moment* state = t.state;
      const bool second = t.second;
      const std::span<const float> group(t.values->data() + begin, count);
      const QuantizedGroup q = expansion ? expand_quantize_group(group, h.expand_min, second, rule) : origin_quantize_group(group);
      std::copy(q.codes.begin(), q.codes.end(), state->codes.begin() + static_cast<std::ptrdiff_t>(begin));
      state->scale[g] = q.scale;
      if (expansion) {
        state->expand[g] = q.expand;
        state->centre[g] = q.centre;
      }
    }
  }
}

}  // namespace lowbit::coat
