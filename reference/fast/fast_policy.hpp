#pragma once
// The special codes of an FP8 Policy for the vector kernels (fast_ops.hpp EncodeConstants), read off
// the scalar encoder itself, so that the kernels hold no second copy of the policy rules.
#include <limits>

#include "fast/fast_ops.hpp"
#include "lowbit/fp8.hpp"

namespace lowbit::fast {

inline EncodeConstants encode_constants(fp8::FormatId format, const fp8::Policy& p) {
  return fp8::dispatch(format, [&](auto traits) {
    using F = decltype(traits);
    constexpr float inf = std::numeric_limits<float>::infinity();
    const auto negative_nan = float_from_bits(0xFFC00000u);
    return EncodeConstants{
        fp8::encode_nearest_even<F>(float_from_bits(0x7F7FFFFFu), p),  // FLT_MAX overflows both formats
        fp8::encode_nearest_even<F>(inf, p),
        fp8::encode_nearest_even<F>(std::numeric_limits<float>::quiet_NaN(), p),
        fp8::encode_nearest_even<F>(negative_nan, p) & 0x80,
    };
  });
}

}  // namespace lowbit::fast
