// COAT activation quantizers (docs/formats/coat-activation.md).
#include "lowbit/coat_activation.hpp"

#include "lowbit/cuda_libdevice.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

#include "lowbit/bf16_round.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/fp8.hpp"

namespace lowbit::coat_act {

namespace {

constexpr float kScaleMinThres = 1e-10f;  // COAT common.py SCALE_MIN_THRES as tl.constexpr fp32 (0x2EDBE6FF)

// Triton 3.9 interpreter's float down-conversion (triton/runtime/interpreter.py _convert_float),
// re-derived from its behaviour: fields are moved, not values. The exponent is clamped into the
// target's field range (no saturation: overflow, Inf and NaN keep the clamped top exponent and the
// truncated mantissa bits), the mantissa is rounded by adding the first discarded bit (ties away
// from zero, and a carry out of the mantissa is OR-ed into the exponent field, not added), and
// target subnormals are made by shifting the already-rounded mantissa (truncating).
std::uint32_t interpreter_downcast(float x, int exp_bits, int man_bits, int bias_out, bool round) {
  const std::uint32_t u = bits_of(x);
  const std::uint32_t sign = u >> 31;
  const int raw_exp = static_cast<int>((u >> 23) & 0xFFu);
  std::uint32_t sig = u & 0x7FFFFFu;
  int e = raw_exp;
  if (raw_exp == 0) {
    if (sig == 0) {
      e = 127 - bias_out;  // zero maps to a zero exponent field
    } else {
      const int bit_pos = 23 - (31 - std::countl_zero(sig));
      e = 1 - bit_pos;
      sig = (sig << bit_pos) & 0x7FFFFFu;
    }
  }
  const int max_field = (1 << exp_bits) - 1;
  const std::uint32_t eo = static_cast<std::uint32_t>(std::clamp(e - 127 + bias_out, 0, max_field));
  std::uint32_t so = (sig >> (23 - man_bits)) & ((1u << man_bits) - 1);
  if (round) so += (sig >> (23 - man_bits - 1)) & 1u;
  const int width = 1 + exp_bits + man_bits;
  const std::uint32_t lane = width == 8 ? 0xFFu : 0xFFFFu;
  so &= lane;
  if (eo == 0 && raw_exp != 0) {
    const int shift = (1 - bias_out) - (raw_exp - 127);
    const std::uint32_t shifted = shift >= 32 ? 0u : so >> shift;
    const int up = man_bits - shift;  // numpy: a shift by a negative or >= 32 count gives 0
    const std::uint32_t lead = (up >= 0 && up < 32) ? (1u << up) : 0u;
    so = (shifted | lead) & lane;
  }
  return ((sign << (width - 1)) | (eo << man_bits) | so) & lane;
}

void check_dims(std::span<const float> x, std::int64_t m, std::int64_t n) {
  if (m <= 0 || n <= 0) throw std::invalid_argument("COAT activation: input must be a non-empty 2-D tensor");
  if (static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(n) != x.size())
    throw std::invalid_argument("COAT activation: input has " + std::to_string(x.size()) + " elements, not M*N");
}

void check_group(int qb) {
  if (qb != 16 && qb != 32 && qb != 64 && qb != 128)
    throw std::invalid_argument("COAT activation: group_size must be 16, 32, 64 or 128 (COAT tunes only these), got " +
                                std::to_string(qb));
}

// NaN-ignoring max of |x| (tl.max with maxnum; numpy nanmax in the interpreter); all NaN gives NaN.
float amax(const float* p, std::int64_t count, std::int64_t stride) {
  float best = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t i = 0; i < count; ++i) best = absmax_step(best, p[i * stride]);
  return best;
}

// 1 x QB groups along each row of a rows x cols view of x (element (r, c) at r * row_stride +
// c * col_stride): codes from the fp32 scale S, the stored scale per o.scale_dtype. The transposed
// kernel runs it twice, on x and on x^T.
Quantized quantize_row_groups(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
                              std::int64_t col_stride, const Options& o) {
  const std::int64_t qb = o.group_size;
  Quantized q;
  q.codes.resize(static_cast<std::size_t>(rows * cols));
  q.scale.resize(static_cast<std::size_t>(rows * (cols / qb)));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < cols / qb; ++g) {
      const float* p = x + r * row_stride + g * qb * col_stride;
      const float s = group_scale(amax(p, qb, col_stride), o);
      for (std::int64_t i = 0; i < qb; ++i)
        q.codes[r * cols + g * qb + i] = cast_fp8(div(p[i * col_stride], s, o.division), o.fp8, o.casts);
      q.scale[r * (cols / qb) + g] = stored_scale(s, o.scale_dtype, o.casts);
    }
  return q;
}

}  // namespace

float fp8_max(fp8::FormatId f) {
  return fp8::dispatch(f, [](auto traits) { return decltype(traits)::max_value; });
}

float div(float a, float b, Division d) {
  if (d == Division::Ieee) return a / b;
  return a * cuda::rcp_approx_ftz(b);  // div.full.f32: MUFU.RCP, then one rounded multiply
}

std::uint8_t cast_fp8(float x, fp8::FormatId f, Casts c) {
  return fp8::dispatch(f, [x, c](auto traits) {
    using F = decltype(traits);
    if (c == Casts::Gpu) return fp8::encode_nearest_even<F>(x, fp8::cuda_satfinite());
    return static_cast<std::uint8_t>(interpreter_downcast(x, F::exponent_bits, F::mantissa_bits, F::bias, true));
  });
}

std::uint16_t cast_bf16(float x, Casts c) {
  if (c == Casts::Gpu) {
    if (std::isnan(x)) return 0x7FFF;  // cvt.rn.bf16.f32 gives the canonical NaN (never reached: S is never NaN for finite data)
    return bf16_round_nearest_even(x);
  }
  return static_cast<std::uint16_t>(interpreter_downcast(x, 8, 7, 127, false));  // truncation for normal x
}

float stored_scale(float s, ScaleDtype d, Casts c) { return d == ScaleDtype::F32 ? s : widen_bf16(cast_bf16(s, c)); }

float absmax_step(float best, float x) {
  const float a = std::fabs(x);
  if (std::isnan(a)) return best;
  return std::isnan(best) || a > best ? a : best;
}

// S = div(RN(amax + 1e-10f), fp8_max)
float group_scale(float amax_value, const Options& o) {
  return div(amax_value + kScaleMinThres, fp8_max(o.fp8), o.division);
}

// Reference: COAT 80ec99f coat/activation/real_quantization/_quantize.py fp8_quantize (_fp8_quantize_kernel lines 74-90)
Quantized quantize_pergroup(std::span<const float> x, std::int64_t m, std::int64_t n, const Options& o) {
  check_dims(x, m, n);
  check_group(o.group_size);
  const std::int64_t qb = o.group_size;
  if (m % (2 * qb) != 0 || n % (4 * qb) != 0)
    throw std::invalid_argument("COAT per-group quantization needs M % (2*QB) == 0 and N % (4*QB) == 0 (no boundary "
                                "checks; every autotuned tile must fit), got M=" + std::to_string(m) +
                                " N=" + std::to_string(n) + " QB=" + std::to_string(qb));
  return quantize_row_groups(x.data(), m, n, n, 1, o);
}

// Reference: COAT 80ec99f coat/activation/real_quantization/_quantize_pertensor.py fp8_quantize_pertensor (kernel 74-91, torch max 139, _division.py fp8_division 84-114)
PerTensor quantize_pertensor_groupscale(std::span<const float> x, std::int64_t m, std::int64_t n, const Options& o) {
  check_dims(x, m, n);
  if (o.group_size != 16)
    throw std::invalid_argument("COAT per-tensor group scaling is autotuned with QB=16 tiles only (group_size must be 16)");
  if (m % 32 != 0 || n % 64 != 0)
    throw std::invalid_argument("COAT per-tensor quantization needs M % 32 == 0 and N % 64 == 0 (QB=16 tiles, no boundary "
                                "checks), got M=" + std::to_string(m) + " N=" + std::to_string(n));
  const std::int64_t qb = 16, sn = n / qb;
  PerTensor q;
  q.group_scale.resize(static_cast<std::size_t>(m * sn));
  float s = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t g = 0; g < sn; ++g) {
      const float sg = widen_bf16(cast_bf16(group_scale(amax(x.data() + r * n + g * qb, qb, 1), o), o.casts));
      q.group_scale[r * sn + g] = sg;
      if (std::isnan(sg)) nan = true;
      else s = std::max(s, sg);
    }
  q.scale = nan ? std::numeric_limits<float>::quiet_NaN() : s;  // torch.max propagates NaN
  q.codes.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) q.codes[i] = cast_fp8(div(x[i], q.scale, o.division), o.fp8, o.casts);
  return q;
}

// Reference: COAT 80ec99f coat/activation/real_quantization/_quantize_transpose.py fp8_quantize_transpose (kernel 88-146)
Transposed quantize_pergroup_transposed(std::span<const float> x, std::int64_t m, std::int64_t n, const Options& o) {
  check_dims(x, m, n);
  check_group(o.group_size);
  const std::int64_t qb = o.group_size;
  if (m % qb != 0 || n % qb != 0)
    throw std::invalid_argument("COAT transposed per-group quantization needs M and N to be multiples of QB, got M=" +
                                std::to_string(m) + " N=" + std::to_string(n) + " QB=" + std::to_string(qb));
  // y and s_y: rows of x; y_t and s_y_t: rows of x^T, its own groups along M
  return {quantize_row_groups(x.data(), m, n, n, 1, o), quantize_row_groups(x.data(), n, m, 1, n, o)};
}

// Reference: COAT 80ec99f coat/activation/real_quantization/_quantize_perblock.py fp8_quantize_perblock (kernel 72-83)
Quantized quantize_perblock(std::span<const float> x, std::int64_t m, std::int64_t n, const Options& o) {
  check_dims(x, m, n);
  check_group(o.group_size);
  const std::int64_t qb = o.group_size;
  if (m % qb != 0 || n % qb != 0)
    throw std::invalid_argument("COAT per-block quantization needs M and N to be multiples of QB (no boundary checks), "
                                "got M=" + std::to_string(m) + " N=" + std::to_string(n) + " QB=" + std::to_string(qb));
  Quantized q;
  q.codes.resize(x.size());
  q.scale.resize(static_cast<std::size_t>((m / qb) * (n / qb)));
  for (std::int64_t bi = 0; bi < m / qb; ++bi)
    for (std::int64_t bj = 0; bj < n / qb; ++bj) {
      float a = std::numeric_limits<float>::quiet_NaN();
      for (std::int64_t r = 0; r < qb; ++r) {
        const float ra = amax(x.data() + (bi * qb + r) * n + bj * qb, qb, 1);
        if (!std::isnan(ra) && (std::isnan(a) || ra > a)) a = ra;
      }
      const float s = group_scale(a, o);
      for (std::int64_t r = 0; r < qb; ++r)
        for (std::int64_t c = 0; c < qb; ++c) {
          const std::int64_t i = (bi * qb + r) * n + bj * qb + c;
          q.codes[i] = cast_fp8(div(x[i], s, o.division), o.fp8, o.casts);
        }
      q.scale[bi * (n / qb) + bj] = stored_scale(s, o.scale_dtype, o.casts);
    }
  return q;
}

}  // namespace lowbit::coat_act
