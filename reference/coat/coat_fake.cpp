// COAT fake quantization (docs/formats/coat-fake.md).
#include "lowbit/coat_fake.hpp"
#include "lowbit/torch_cpu_mul.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "lowbit/float_bits.hpp"

namespace lowbit::coat_fake {

namespace {

constexpr std::uint32_t kGpuNaN = 0x7FFFFFFFu;      // NVIDIA's canonical NaN (docs/formats/coat-fake.md)
constexpr std::uint32_t kX86DefaultNaN = 0xFFC00000u;  // SSE's result of an invalid operation (inf - inf, 0 * inf)

struct Bits {
  int e_bit, m_bit;
};
Bits bits_for(fp8::FormatId f) {
  const fp8::FormatInfo info = fp8::format_info(f);
  return {info.exponent_bits, info.mantissa_bits};
}

// floor(log2|x|) clamped to [2 - 2^(e-1), 2^(e-1)] for finite nonzero a; zero gives log2 = -inf,
// which the clamp lifts to the low end. Exact, where COAT takes floor(log2(a)) with a float32 log2:
// a log2 that is off by one next to a power of two changes mant but not y (the .md shows why), so
// the exact exponent reproduces every implementation of log2 that is within an ulp.
float clamped_exponent(float a, Bits b) {
  const int lo = 2 - (1 << (b.e_bit - 1)), hi = 1 << (b.e_bit - 1);
  if (a == 0.0f) return static_cast<float>(lo);
  const int e = std::ilogb(a);
  return static_cast<float>(e < lo ? lo : (e > hi ? hi : e));
}

float quiet(float x) { return float_from_bits(bits_of(x) | 0x00400000u); }

// The NaN of a float32 operation on x86 (SSE/AVX, as numpy and torch run it on the CPU): one NaN
// operand comes back quieted with its sign and payload; of two, the first; an invalid operation on
// numbers (0 * Inf, Inf / Inf, Inf - Inf) gives the default NaN 0xFFC00000.
float x86_result(float result, float first, float second) {
  if (!std::isnan(result)) return result;
  if (std::isnan(first)) return quiet(first);
  if (std::isnan(second)) return quiet(second);
  return float_from_bits(kX86DefaultNaN);
}

// mant / mant_int / mant_frac / round / mant_q of both kernels, for finite a >= 0; `round` is the
// rounding of the scaled fraction. Returns (mant_q, 2^expo).
template <class Round>
std::pair<float, float> mantissa(float a, Bits b, Round round) {
  const float p = std::ldexp(1.0f, static_cast<int>(clamped_exponent(a, b)));  // tl.exp2 / 2**expo of an integer: exact
  const float mhigh = std::ldexp(1.0f, b.m_bit);
  const float mant = a / p;
  const float mant_int = std::floor(mant);
  const float frac = round((mant - mant_int) * mhigh);
  return {mant_int + frac / mhigh, p};
}

}  // namespace

// Reference: COAT 80ec99f coat/activation/fake_quantization/FloatPointQuantizeTriton.py libdevice.round (line 99, __nv_roundf)
float round_half_away(float v) {
  const float t = std::trunc(v);
  return std::fabs(v - t) >= 0.5f ? t + std::copysign(1.0f, v) : t;
}

// Reference: COAT 80ec99f coat/activation/fake_quantization/FloatPointQuantizeTriton.py floatExMy_quantize_triton (_floatExMy_quantize_kernel lines 87-104)
float floatexmy_triton(float x, fp8::FormatId f, Model m) {
  const Bits b = bits_for(f);
  if (std::isnan(x)) return m == Model::Gpu ? float_from_bits(kGpuNaN) : quiet(std::fabs(x));  // |x|'s NaN flows through
  if (std::isinf(x)) return float_from_bits(m == Model::Gpu ? kGpuNaN : kX86DefaultNaN);     // mant - floor(mant) = inf - inf
  const float sign = std::signbit(x) ? -1.0f : 1.0f;  // 1 - 2*signbit(x): -0 keeps its sign
  const auto [mant_q, p] = mantissa(std::fabs(x), b, round_half_away);
  return (sign * p) * mant_q;
}

// Reference: COAT 80ec99f coat/activation/fake_quantization/FloatPointQuantizeTorch.py floatExMy_quantize_torch (lines 22-45)
float floatexmy_torch(float x, fp8::FormatId f) {
  const Bits b = bits_for(f);
  // x.abs() keeps the payload and drops the sign, and that NaN reaches y (x.sign() of a NaN is 0, and
  // 0 times the NaN is the NaN): 0xFFFFFFFF -> 0x7FFFFFFF, a signalling 0x7F800001 -> 0x7FC00001
  if (std::isnan(x)) return quiet(std::fabs(x));
  if (std::isinf(x)) return float_from_bits(kX86DefaultNaN);
  const float sign = x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);  // torch.sign: -0 -> +0
  const auto [mant_q, p] = mantissa(std::fabs(x), b, [](float v) { return std::nearbyint(v); });  // torch.round: half to even
  return (sign * p) * mant_q;
}

float symm_scale(float absmax, fp8::FormatId f, Model model) {
  const float range = 2.0f * fp8::format_info(f).max_value;  // Qp - Qn = 2 Qp, Qp forced to the largest finite value
  const float twice = 2.0f * absmax;
  if (model == Model::Gpu) return twice * (1.0f / range);  // CUDA torch: tensor / scalar is a reciprocal multiply
  return twice / range;                                    // CPU torch: true division
}

// Reference: COAT 80ec99f coat/activation/fake_quantization/quantize_function.py SymmQuantizer.forward (lines 222-266, block_cut 10-58, find_max_min 180-207)
Symm symm_quantize(std::span<const float> x, std::int64_t m, std::int64_t n, std::int64_t row_block,
                   std::int64_t col_block, float epsilon, fp8::FormatId f, Model model, bool vectorized_mul) {
  if (m <= 0 || n <= 0 || static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(n) != x.size())
    throw std::invalid_argument("COAT SymmQuantizer: input must be a non-empty M x N tensor");
  const std::int64_t rb = row_block == -1 ? m : row_block, cb = col_block == -1 ? n : col_block;
  if (rb <= 0 || cb <= 0 || m % rb != 0 || n % cb != 0)
    throw std::invalid_argument("COAT block_cut (pad_block=False) asserts that the block sizes divide the shape, got M=" +
                                std::to_string(m) + " N=" + std::to_string(n) + " row_block=" + std::to_string(rb) +
                                " col_block=" + std::to_string(cb));
  const std::int64_t rows = m / rb, cols = n / cb;
  Symm s;
  s.rq.resize(x.size());
  s.q.resize(x.size());
  s.scale.resize(static_cast<std::size_t>(rows * cols));
  for (std::int64_t bi = 0; bi < rows; ++bi)
    for (std::int64_t bj = 0; bj < cols; ++bj) {
      float amax = 0.0f;
      bool nan = false;
      for (std::int64_t r = 0; r < rb; ++r)
        for (std::int64_t c = 0; c < cb; ++c) {
          const float a = std::fabs(x[static_cast<std::size_t>((bi * rb + r) * n + bj * cb + c)]);
          if (std::isnan(a)) nan = true;
          else if (a > amax) amax = a;
        }
      // torch's amax of a block holding a NaN is the canonical 0x7FC00000 (whatever the NaN's sign
      // and payload); that NaN is the scale, and every finite element's Q and RQ.
      const float absmax = nan ? float_from_bits(0x7FC00000u) : amax + epsilon;
      const float scale = symm_scale(absmax, f, model);
      s.scale[static_cast<std::size_t>(bi * cols + bj)] = nan && model == Model::Gpu ? float_from_bits(kGpuNaN) : scale;
      for (std::int64_t r = 0; r < rb; ++r)
        for (std::int64_t c = 0; c < cb; ++c) {
          const auto i = static_cast<std::size_t>((bi * rb + r) * n + bj * cb + c);
          // x / scale on the CPU: a NaN element's own NaN (sign and payload) wins over the scale's,
          // and the Triton path then drops its sign (floatexmy_triton), as for any NaN it is given
          float q = x86_result(x[i] / scale, x[i], scale);
          if (std::isnan(q) && model == Model::Gpu) q = float_from_bits(kGpuNaN);
          const float qf = floatexmy_triton(q, f, model);
          // q * scale: when both are NaN, whose NaN comes back depends on where torch's CPU loop
          // computes the element; 1x1 tiles make Q and the scales the same shape (blocks x 1 x 1),
          // multiplied by torch's element-wise loop over all the blocks
          const bool scale_first = rb * cb == 1 ? torch_mul_same_shape_b_nan_wins(bi * cols + bj, rows * cols, vectorized_mul)
                                                : torch_mul_broadcast_nan_wins(r * cb + c, rb * cb, vectorized_mul);
          float rq = scale_first ? x86_result(qf * scale, scale, qf) : x86_result(qf * scale, qf, scale);
          if (std::isnan(rq) && model == Model::Gpu) rq = float_from_bits(kGpuNaN);
          s.q[i] = qf;
          s.rq[i] = rq;
        }
    }
  return s;
}

}  // namespace lowbit::coat_fake
