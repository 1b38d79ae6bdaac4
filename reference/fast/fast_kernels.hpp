#pragma once
// The vector kernels behind the fast paths (fast_ops.hpp), written once over an xsimd architecture
// and compiled once per instruction set (fast_kernels_<arch>.cpp). Each computes, lane by lane, the
// operations of its scalar definition in the same order (reference/codebook/blockwise.cpp, fp8.hpp,
// codebook.cpp): the same IEEE divisions, multiplies and comparisons, integer operations where the
// scalar code has integer operations, and a fused multiply-add only where the scalar code calls
// std::fma. One exception, integer only: the FP8 encoder's rounding is the scalar rule rearranged
// (encode says why it is the same), and the exhaustive sweep proves it on every float32 input.
// Private to the arithmetic library; included only by fast_kernels_<arch>.cpp.
//
// Float comparisons: <, <=, >, >= and == are IEEE's (false with a NaN), as in C++; xsimd 8.1's !=
// on AVX is not (_CMP_NEQ_OQ: NaN != NaN is false), so NaN tests use xsimd::isnan, never x != x.
//
// One rule for these files: everything here has internal linkage (the anonymous namespace) and calls
// nothing inline from other lowbit headers, because a translation unit compiled with -mavx2 emits
// its inline functions with AVX encodings, and the linker may keep that copy for the whole program.
#include <immintrin.h>  // narrow4, widen and byte_gather alone: declares every x86 instruction set's intrinsics; each kernel file calls only its own
#include <xsimd/xsimd.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "fast/fast_ops.hpp"
#include "lowbit/fp8.hpp"        // the formats' constants only (constexpr: no code)
#include "lowbit/optimizer.hpp"  // the steps' scalar structs only

namespace lowbit::fast {
namespace {

template <class Arch>
struct Kernels {
  using F = xsimd::batch<float, Arch>;
  using I = xsimd::batch<std::int32_t, Arch>;
  static constexpr std::size_t W = F::size;
  // xsimd's fma falls back to x * y + z (two roundings) where the instruction set has no FMA: only
  // the FMA3 architectures may use it; elsewhere each lane calls std::fma.
  static constexpr bool kNativeFma = std::is_base_of_v<xsimd::fma3<xsimd::avx2>, Arch>;

  // Gathers. xsimd 8.1's batch::gather names its kernel with two template arguments, which its AVX2
  // overloads (one argument, or a broken enable_if) cannot take, so it always falls back to one
  // scalar load per lane; the AVX2 float overload is reached by naming it as below. Table words
  // travel through the float gather as bits (a load: no arithmetic touches them).
  static constexpr bool kAvx2Gather = std::is_base_of_v<xsimd::avx2, Arch>;
  static F gather(const float* src, I index) {
    if constexpr (kAvx2Gather) return xsimd::kernel::gather<Arch>(src, index, Arch{});
    else return F::gather(src, index);
  }
  static I gather(const std::int32_t* src, I index) {
    if constexpr (kAvx2Gather)
      return xsimd::bitwise_cast<I>(xsimd::kernel::gather<Arch>(reinterpret_cast<const float*>(src), index, Arch{}));
    else return I::gather(src, index);
  }

  // a * b + c with one rounding: the instruction on FMA3 architectures, else std::fma per lane
  static F fma_lanes(F a, F b, F c) {
    if constexpr (kNativeFma) {
      const F r = xsimd::fma(a, b, c);
      // A NaN operand: the instruction returns the NaN of the operand the compiler encoded first;
      // std::fma (glibc) returns a's, else b's, else c's, quieted. Rare: checked once per vector.
      const auto a_nan = xsimd::isnan(a), b_nan = xsimd::isnan(b), c_nan = xsimd::isnan(c);
      if (!xsimd::any(a_nan | b_nan | c_nan)) return r;
      const F first = xsimd::select(a_nan, a, xsimd::select(b_nan, b, c));
      const F quieted = xsimd::bitwise_cast<F>(xsimd::bitwise_cast<I>(first) | I(0x00400000));
      return xsimd::select(a_nan | b_nan | c_nan, quieted, r);
    } else {
      alignas(64) float x[W], y[W], z[W];
      a.store_aligned(x);
      b.store_aligned(y);
      c.store_aligned(z);
      for (std::size_t j = 0; j < W; ++j) x[j] = std::fma(x[j], y[j], z[j]);
      return F::load_aligned(x);
    }
  }

  static I int_mask(xsimd::batch_bool<float, Arch> m) { return xsimd::bitwise_cast<I>(xsimd::bitwise_cast<Arch>(m)); }
  static I choose(xsimd::batch_bool<std::int32_t, Arch> m, I a, I b) { return xsimd::select(m, a, b); }

  // ---- FP8 encoding, round to nearest even (fp8.hpp detail::encode_with, truncate_magnitude,
  // rounds_up_nearest_even), on int32 lanes: every quantity fits in 31 bits (see below).
  template <int Bias, int M, int MaxFinite>
  static I encode(F x, const EncodeConstants& k) {
    const I u = xsimd::bitwise_cast<I>(x);
    const I sign = (u >> 24) & I(0x80);  // arithmetic shift: bit 31 lands on bit 7 either way
    const I a = u & I(0x7FFFFFFF);
    // truncate_magnitude's two cases as one: the code is value >> shift. Normal in the target
    // (exponent field >= 128 - Bias): the pattern re-biased in place, value = a - ((127 - Bias) << 23),
    // shift 23 - M. Subnormal: the significand (the hidden bit set where the field is not 0), shift
    // 151 - Bias - M - e with e the field, 1 for binary32's subnormals. With e the field clamped to
    // [1, 128 - Bias] both read value = a - ((e - 1) << 23), shift = 151 - Bias - M - e, since for a
    // field e >= 1, a - ((e - 1) << 23) is (a & 0x7FFFFF) | (1 << 23). The scalar code takes shifts
    // up to 63 (64 or more: "below a quarter ulp"); a significand has 24 bits, so every shift from
    // 25 up gives code 0 and a remainder below half: capping at 31 gives the same code.
    const I e = xsimd::min(xsimd::max(a >> 23, I(1)), I(128 - Bias));
    const I value = a - ((e - I(1)) << 23);
    const I shift = xsimd::min(I(151 - Bias - M) - e, I(31));  // >= 23 - M >= 20
    // Nearest even, by adding half - 1 and the truncated code's lowest bit before the shift: for
    // value = q 2^shift + r that gives q + 1 where r > half, q where r < half, and q + (q & 1) where
    // r = half, rounds_up_nearest_even's answers. No lane overflows: value < 2^31 - 2^28 where
    // shift < 31, value < 2^24 where shift = 31.
    const I odd = (value >> shift) & I(1);
    const I magnitude = (value + ((I(1) << (shift - I(1))) - I(1)) + odd) >> shift;
    I out = sign | magnitude;
    out = choose(magnitude > I(MaxFinite), sign | I(k.overflow), out);
    out = choose(a == I(0x7F800000), sign | I(k.inf), out);
    out = choose(a > I(0x7F800000), (sign & I(k.nan_sign_mask)) | I(k.nan), out);
    return out;
  }

  // One vector's codes (each lane 0..255) to count <= W bytes: the tails.
  static void narrow(I v, std::uint8_t* out, std::size_t count) {
    alignas(64) std::int32_t lanes[W];
    v.store_aligned(lanes);
    for (std::size_t j = 0; j < count; ++j) out[j] = static_cast<std::uint8_t>(lanes[j]);
  }

  // Four vectors' codes (each lane 0..255: a, b, c, d hold consecutive elements) to 4 W bytes in
  // order. One of three places with intrinsics (with widen and byte_gather): xsimd 8.1 has no
  // narrowing conversion (no pack), and the lane-by-lane narrow above took half the cast's time
  // (docs/performance.md). Both packs saturate, which leaves values 0..255 unchanged: the bytes are
  // the lanes' low bytes, as narrow's.
  static void narrow4(I a, I b, I c, I d, std::uint8_t* out) {
    if constexpr (std::is_base_of_v<xsimd::avx2, Arch>) {
      // AVX2 packs within each 128-bit half: the bytes come out as the dwords
      // a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7, put in order by one permute.
      const __m256i ab = _mm256_packs_epi32(a, b);
      const __m256i cd = _mm256_packs_epi32(c, d);
      const __m256i bytes = _mm256_packus_epi16(ab, cd);
      const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permutevar8x32_epi32(bytes, order));
    } else if constexpr (std::is_base_of_v<xsimd::sse2, Arch>) {
      const __m128i ab = _mm_packs_epi32(a, b);
      const __m128i cd = _mm_packs_epi32(c, d);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(ab, cd));
    } else {
      narrow(a, out, W);
      narrow(b, out + W, W);
      narrow(c, out + 2 * W, W);
      narrow(d, out + 3 * W, W);
    }
  }

  // W bytes from in, each widened to an int32 lane (0..255). With narrow4 and byte_gather, the
  // places with intrinsics: xsimd 8.1 has no widening load (its converting load goes lane by lane).
  static I widen(const std::uint8_t* in) {
    if constexpr (std::is_base_of_v<xsimd::avx2, Arch>) {
      return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in)));
    } else if constexpr (std::is_base_of_v<xsimd::sse2, Arch>) {
      std::int32_t four;
      std::memcpy(&four, in, 4);
      const __m128i zero = _mm_setzero_si128();
      return _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(four), zero), zero);
    } else {
      alignas(64) std::int32_t lanes[W];
      for (std::size_t j = 0; j < W; ++j) lanes[j] = in[j];
      return I::load_aligned(lanes);
    }
  }

  // The dequantizers' memory floor (fp8_cast.hpp widening_floor): out[i] = the float32 whose top
  // byte is in[i] and whose other bits are 0, W elements at a time: read a byte, write float32,
  // with no arithmetic beyond the shift.
  static void widen_bytes_span(const std::uint8_t* in, float* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + W <= n; i += W) xsimd::bitwise_cast<F>(widen(in + i) << 24).store_unaligned(out + i);
    for (; i < n; ++i) {
      const std::uint32_t u = std::uint32_t{in[i]} << 24;
      std::memcpy(out + i, &u, 4);
    }
  }

  // out[i] = code(x[i]) for a kernel code(F) -> I of codes 0..255: 4 W elements at a time, then
  // one vector at a time, then a partial vector (zeros in the unused lanes, which are not stored).
  template <class Code>
  static void codes_span(const float* x, std::uint8_t* out, std::size_t n, const Code& code) {
    std::size_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
      const I a = code(F::load_unaligned(x + i)), b = code(F::load_unaligned(x + i + W));
      const I c = code(F::load_unaligned(x + i + 2 * W)), d = code(F::load_unaligned(x + i + 3 * W));
      narrow4(a, b, c, d, out + i);
    }
    for (; i + W <= n; i += W) narrow(code(F::load_unaligned(x + i)), out + i, W);
    if (i < n) narrow(code(load_partial(x + i, n - i)), out + i, n - i);
  }

  // Loads count <= W floats, the rest of the lanes 0.0f (a tail).
  static F load_partial(const float* x, std::size_t count) {
    alignas(64) float lanes[W] = {};
    std::memcpy(lanes, x, count * sizeof(float));
    return F::load_aligned(lanes);
  }

  // Stores the first count <= W lanes (a tail).
  static void store_partial(F v, float* x, std::size_t count) {
    alignas(64) float lanes[W];
    v.store_aligned(lanes);
    std::memcpy(x, lanes, count * sizeof(float));
  }

  // codes[i] = encode(x[i] / divisor) (Divide) or encode(x[i]).
  template <int Bias, int M, int MaxFinite, bool Divide>
  static void encode_span(const float* x, float divisor, std::uint8_t* out, std::size_t n, const EncodeConstants& k) {
    const F d(divisor);
    codes_span(x, out, n, [&](F v) {
      if constexpr (Divide) v = v / d;
      return encode<Bias, M, MaxFinite>(v, k);
    });
  }

  // The benchmarks' memory floor (fp8_cast.hpp streaming_floor): out[i] = the top byte of x[i]'s
  // bits, through the same loop, loads, narrowing and stores as encode_span, with no arithmetic.
  static void top_bytes_span(const float* x, float, std::uint8_t* out, std::size_t n, const EncodeConstants&) {
    codes_span(x, out, n, [](F v) { return (xsimd::bitwise_cast<I>(v) >> 24) & I(0xFF); });
  }

  // ---- torchao's branchless codebook search (codebook.cpp torchao_search) of x[i] / divisor, with
  // the table read by gathers: the same comparisons in the same order, so any table (sorted or not,
  // NaN entries included) gives the scalar search's codes.
  template <int Size>
  static I torchao_search(F y, const float* q) {
    I c = int_mask(y >= F(q[Size / 2])) & I(Size / 2);
    for (int s = Size / 4; s >= 1; s /= 2) c = c + (int_mask(y >= gather(q, c + I(s))) & I(s));
    const I up = xsimd::min(c + I(1), I(Size - 1));
    const F qc = gather(q, c);
    const F r = y - qc;
    const F half = (gather(q, up) - qc) * F(0.5f);
    return choose(int_mask(r >= half) != I(0), up, c);
  }

  // The same search with the bucket table (fast_ops.hpp SearchBuckets): one gather of the lanes'
  // buckets; where every lane's code is known from its bucket, that is the answer; where every
  // lane's bracket is known, the last step alone; otherwise the whole search.
  template <int Size>
  static I torchao_search_bucketed(F y, const float* q, const std::int32_t* table) {
    const I key = xsimd::bitwise_cast<I>(y);
    const I e = gather(table, (key >> kBucketShift) & I(kBucketMask));
    if (xsimd::all((e & I(kCodeKnown)) != I(0))) return (e >> 8) & I(0xFF);
    if (xsimd::all((e & I(kBracketKnown)) != I(0))) {
      const I c = e & I(0xFF);
      const I up = xsimd::min(c + I(1), I(Size - 1));
      const F qc = gather(q, c);
      const F r = y - qc;
      const F half = (gather(q, up) - qc) * F(0.5f);
      return choose(int_mask(r >= half) != I(0), up, c);
    }
    return torchao_search<Size>(y, q);
  }

  template <int Size>
  static void torchao_search_table_span(const float* x, float divisor, const float* q, const std::int32_t* table,
                                        std::uint8_t* out, std::size_t n) {
    const F d(divisor);
    codes_span(x, out, n, [&](F v) { return torchao_search_bucketed<Size>(v / d, q, table); });
  }

  template <int Size>
  static void torchao_search_span(const float* x, float divisor, const float* q, std::uint8_t* out, std::size_t n) {
    const F d(divisor);
    codes_span(x, out, n, [&](F v) { return torchao_search<Size>(v / d, q); });
  }

  // ---- bitsandbytes' CPU table index (codebook.cpp BnbCpuLut::index_of) of x[i] * inv.
  static I bnb_index(F y) {
    const auto nan = xsimd::isnan(y);
    y = xsimd::select(y < F(-1.0f), F(-1.0f), xsimd::select(F(1.0f) < y, F(1.0f), y));  // std::clamp
    const F t = (y + F(1.0f)) * F(0.5f);
    const F f = fma_lanes(t, F(65535.0f), F(0.5f));
    // f lies in [0.5, 65535.5]: truncation toward zero, as static_cast<std::uint16_t>
    return choose(int_mask(nan) != I(0), I(0), xsimd::batch_cast<std::int32_t>(f));
  }

  // table[index] for each lane, index 0..65535, the table padded by 3 readable bytes past its last
  // entry (BnbCpuLut): AVX2 gathers the 32-bit word at each byte offset (scale 1) and keeps its low
  // byte, the entry itself (x86 is little-endian); SSE2 has no gather and reads lane by lane.
  static I byte_gather(const std::uint8_t* table, I index) {
    if constexpr (kAvx2Gather) {
      return I(_mm256_i32gather_epi32(reinterpret_cast<const int*>(table), index, 1)) & I(0xFF);
    } else {
      alignas(64) std::int32_t lanes[W];
      index.store_aligned(lanes);
      for (std::size_t j = 0; j < W; ++j) lanes[j] = table[lanes[j]];
      return I::load_aligned(lanes);
    }
  }

  static void bnb_lut_span(const float* x, float inv, const std::uint8_t* table, std::uint8_t* out, std::size_t n) {
    const F s(inv);
    codes_span(x, out, n, [&](F v) { return byte_gather(table, bnb_index(v * s)); });
  }

  // ---- max |x| over a block: the largest non-NaN |x| (+0 when there is none), and whether a NaN
  // was seen. Every |x| is >= +0 and not NaN once NaNs are set aside, so the maximum is one value
  // whatever the order of comparison: the scalar loops' result, bit for bit.
  static AbsMax abs_max(const float* x, std::size_t n) {
    F m(0.0f);
    auto nan = F(0.0f) != F(0.0f);
    std::size_t i = 0;
    for (; i < n; i += W) {
      const std::size_t count = n - i < W ? n - i : W;
      const F a = xsimd::abs(count == W ? F::load_unaligned(x + i) : load_partial(x + i, count));
      const auto is_nan = xsimd::isnan(a);
      nan = nan | is_nan;
      m = xsimd::max(m, xsimd::select(is_nan, F(0.0f), a));
    }
    alignas(64) float lanes[W];
    m.store_aligned(lanes);
    float best = 0.0f;
    for (std::size_t j = 0; j < W; ++j) best = best < lanes[j] ? lanes[j] : best;
    return {best, xsimd::any(nan)};
  }

  // ---- the optimizers' element updates (optimizer_torchao.cpp torchao_adam_element,
  // optimizer_bnb.cpp bnb_adam_cpu_element), W elements at a time: the same operations in the same
  // order and with the same operands on each side, so that a NaN meeting a NaN keeps the same payload
  // (x86 returns the first operand's). sqrt and division are IEEE's, correctly rounded in vectors too.
  // In: param, grad and the dequantized old moments; out, in place: the float32 parameter before its
  // write-back rounding and the new (unquantized) moments.

  // torch.maximum(old, v): a NaN on either side gives torch's NaN (the scalar code's NAN, 0x7FC00000);
  // else std::max, which returns its first argument unless it is less than the second (old on +-0 ties)
  static F torch_maximum(F old, F v) {
    const F quiet_nan = xsimd::bitwise_cast<F>(I(0x7FC00000));
    return xsimd::select(xsimd::isnan(old) | xsimd::isnan(v), quiet_nan, xsimd::select(old < v, v, old));
  }

  static void torchao_adam_lanes(F* p, F g, F* m, F* v, F* v_max, const optimizer::TorchaoAdamScalars& s) {
    if (s.adamw) *p = *p - F(s.lr * s.wd) * *p;  // decoupled weight decay
    else g = g + F(s.wd) * *p;                   // L2 on the gradient
    const F m_old = *m, v_old = *v, g2 = g * g;
    // torch.lerp(start, end, weight): start + weight * (end - start), fused or not
    *m = s.fused ? fma_lanes(F(s.w1), g - m_old, m_old) : m_old + F(s.w1) * (g - m_old);
    *v = s.fused ? fma_lanes(F(s.w2), g2 - v_old, v_old) : v_old + F(s.w2) * (g2 - v_old);
    const F v_used = v_max ? (*v_max = torch_maximum(*v_max, *v)) : *v;
    const F denom = xsimd::sqrt(v_used) / F(s.sqrt_bc2) + F(s.eps);
    const F u = (F(s.lr) * (*m / F(s.bc1))) / denom;
    *p = xsimd::select(xsimd::isnan(u), u, *p - u);  // a NaN u as it is (torchao_adam_element)
  }

  // The count <= W elements at x (a whole vector, or a tail), and back.
  static F load_lanes(const float* x, std::size_t count) { return count == W ? F::load_unaligned(x) : load_partial(x, count); }
  static void store_lanes(F value, float* x, std::size_t count) {
    if (count == W) value.store_unaligned(x);
    else store_partial(value, x, count);
  }

  static void torchao_adam_span(float* param, const float* grad, float* m, float* v, float* v_max, std::size_t n,
                                const optimizer::TorchaoAdamScalars& s) {
    for (std::size_t i = 0; i < n; i += W) {
      const std::size_t c = n - i < W ? n - i : W;
      F p = load_lanes(param + i, c), mv = load_lanes(m + i, c), vv = load_lanes(v + i, c);
      F max_v = v_max ? load_lanes(v_max + i, c) : F(0.0f);
      torchao_adam_lanes(&p, load_lanes(grad + i, c), &mv, &vv, v_max ? &max_v : nullptr, s);
      store_lanes(p, param + i, c);
      store_lanes(mv, m + i, c);
      store_lanes(vv, v + i, c);
      if (v_max) store_lanes(max_v, v_max + i, c);
    }
  }

  static void bnb_adam_lanes(F* p, F g, F* m, F* v, const optimizer::BnbAdamScalars& s) {
    g = g * F(1.0f);  // grad * 1.0f, as the scalar step passes it (it quiets a signalling NaN)
    const F m_old = *m, v_old = *v;
    *m = s.fused ? fma_lanes(g, F(s.w1), m_old * F(s.b1)) : m_old * F(s.b1) + g * F(s.w1);
    *v = s.fused ? fma_lanes(F(s.w2) * g, g, v_old * F(s.b2)) : v_old * F(s.b2) + (F(s.w2) * g) * g;
    const F denom = xsimd::sqrt(*v) / F(s.c2) + F(s.eps);
    if (s.decays) *p = *p * F(s.decay);
    *p = *p + (F(s.step_value) * *m) / denom;
  }

  static void bnb_adam_span(float* param, const float* grad, float* m, float* v, std::size_t n,
                            const optimizer::BnbAdamScalars& s) {
    for (std::size_t i = 0; i < n; i += W) {
      const std::size_t c = n - i < W ? n - i : W;
      F p = load_lanes(param + i, c), mv = load_lanes(m + i, c), vv = load_lanes(v + i, c);
      bnb_adam_lanes(&p, load_lanes(grad + i, c), &mv, &vv, s);
      store_lanes(p, param + i, c);
      store_lanes(mv, m + i, c);
      store_lanes(vv, v + i, c);
    }
  }

  // ---- bitsandbytes' other CPU rules (optimizer_bnb_rules.cpp), W elements at a time, each
  // expression as the scalar element writes it (operands in the same places: NaN payloads alike)

  // a + b with a's NaN (quieted) where both are NaN (optimizer_bnb_rules.cpp plus)
  static F plus_lanes(F a, F b) {
    const F quiet_a = xsimd::bitwise_cast<F>(xsimd::bitwise_cast<I>(a) | I(0x00400000));
    return xsimd::select(xsimd::isnan(a) & xsimd::isnan(b), quiet_a, a + b);
  }
  // torch's add(self, other, alpha) and addcmul(self, t1, t2, value), fused or not
  static F add_alpha_lanes(F self, F other, float alpha, bool fused) {
    return fused ? fma_lanes(other, F(alpha), self) : plus_lanes(self, F(alpha) * other);
  }
  static F addcmul_lanes(F self, F t1, F t2, float value, bool fused) {
    return fused ? fma_lanes(F(value) * t1, t2, self) : plus_lanes(self, (F(value) * t1) * t2);
  }
  // torch's CPU sqrt: +qNaN 0x7FC00000 for a negative input, else IEEE's (a NaN passes)
  static F torch_sqrt_lanes(F x) {
    return xsimd::select(x < F(0.0f), xsimd::bitwise_cast<F>(I(0x7FC00000)), xsimd::sqrt(x));
  }
  // torch's CPU sign: (0 < a) - (a < 0); +0 for +-0 and NaN
  static F torch_sign_lanes(F a) {
    return xsimd::select(F(0.0f) < a, F(1.0f), F(0.0f)) - xsimd::select(a < F(0.0f), F(1.0f), F(0.0f));
  }

  static void bnb_rule_lanes(optimizer::BnbRule rule, F* p, F g, F* st, std::int64_t step,
                             const optimizer::BnbRuleScalars& s) {
    g = g * F(1.0f);  // grad * 1.0f (gnorm_scale), as the scalar step passes it
    switch (rule) {
      case optimizer::BnbRule::Lion: {
        if (s.decays) *p = *p * F(s.decay);
        const F dir = torch_sign_lanes(*st * F(s.b1) + g * F(s.w1));
        *p = add_alpha_lanes(*p, dir, s.neg_lr, s.fused);
        *st = add_alpha_lanes(*st * F(s.b2), g, s.w2, s.fused);
        return;
      }
      case optimizer::BnbRule::Momentum:
        g = add_alpha_lanes(g, *p, s.wd, s.fused);
        *st = step == 1 ? g : plus_lanes(*st * F(s.b1), g);
        *p = add_alpha_lanes(*p, *st, s.neg_lr, s.fused);
        return;
      case optimizer::BnbRule::Rmsprop:
      case optimizer::BnbRule::Adagrad: {
        g = add_alpha_lanes(g, *p, s.wd, s.fused);
        *st = rule == optimizer::BnbRule::Rmsprop ? addcmul_lanes(*st * F(s.b1), g, g, s.w1, s.fused)
                                                  : addcmul_lanes(*st, g, g, 1.0f, s.fused);
        const F denom = torch_sqrt_lanes(*st) + F(s.eps);
        *p = plus_lanes(*p, (F(s.neg_lr) * g) / denom);
        return;
      }
    }
  }

  static void bnb_rule_span(optimizer::BnbRule rule, float* param, const float* grad, float* state, std::size_t n,
                            std::int64_t step, const optimizer::BnbRuleScalars& s) {
    for (std::size_t i = 0; i < n; i += W) {
      const std::size_t c = n - i < W ? n - i : W;
      F p = load_lanes(param + i, c), st = load_lanes(state + i, c);
      bnb_rule_lanes(rule, &p, load_lanes(grad + i, c), &st, step, s);
      store_lanes(p, param + i, c);
      store_lanes(st, state + i, c);
    }
  }

  static void bnb_ademamix_span(float* param, const float* grad, float* m1, float* m2, float* nu, std::size_t n,
                                const optimizer::BnbAdemamixScalars& s) {
    for (std::size_t i = 0; i < n; i += W) {
      const std::size_t c = n - i < W ? n - i : W;
      F p = load_lanes(param + i, c), a = load_lanes(m1 + i, c), b = load_lanes(m2 + i, c), v = load_lanes(nu + i, c);
      const F g = load_lanes(grad + i, c) * F(1.0f);
      a = add_alpha_lanes(a * F(s.b1), g, s.w1, s.fused);
      b = add_alpha_lanes(b * F(s.b3), g, s.w3, s.fused);
      v = addcmul_lanes(v * F(s.b2), g, g, s.w2, s.fused);
      const F update = plus_lanes(a / F(s.c1), F(s.alpha) * b) / (torch_sqrt_lanes(v) / F(s.c2) + F(s.eps));
      if (s.decays) p = p * F(s.decay);
      store_lanes(add_alpha_lanes(p, update, s.neg_lr, s.fused), param + i, c);
      store_lanes(a, m1 + i, c);
      store_lanes(b, m2 + i, c);
      store_lanes(v, nu + i, c);
    }
  }

  static Ops ops(const char* name) {
    Ops o;
    o.name = name;
    using E4 = fp8::E4M3FN;
    using E5 = fp8::E5M2;
    o.encode_e4m3 = encode_span<E4::bias, E4::mantissa_bits, E4::max_finite, false>;
    o.encode_e5m2 = encode_span<E5::bias, E5::mantissa_bits, E5::max_finite, false>;
    o.encode_e4m3_divided = encode_span<E4::bias, E4::mantissa_bits, E4::max_finite, true>;
    o.top_bytes = top_bytes_span;
    o.widen_bytes = widen_bytes_span;
    o.torchao_search16 = torchao_search_span<16>;
    o.torchao_search256 = torchao_search_span<256>;
    o.torchao_search16_table = torchao_search_table_span<16>;
    o.torchao_search256_table = torchao_search_table_span<256>;
    o.bnb_lut = bnb_lut_span;
    o.abs_max = abs_max;
    o.torchao_adam = torchao_adam_span;
    o.bnb_adam = bnb_adam_span;
    o.bnb_rule = bnb_rule_span;
    o.bnb_ademamix = bnb_ademamix_span;
    return o;
  }
};

}  // namespace
}  // namespace lowbit::fast
