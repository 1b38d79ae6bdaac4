#pragma once
// FP8 casts of whole arrays (float32, bf16 or f16 in; one code per element out, in the caller's
// memory): vectorized and multi-threaded, byte-identical to encode_nearest_even of fp8.hpp on every
// element under every Policy, for any thread count (proven on all 2^32 float32 inputs by the
// exhaustive sweep, fp8_sweep.hpp, and on all 2^16 bf16 and f16 inputs by test_fast_paths).
// The fp8::scalar functions are the readable definitions: the element loop over fp8.hpp.
#include <cstdint>
#include <span>

#include "lowbit/fp8.hpp"

namespace lowbit::fp8 {

// codes.size() must equal in.size(); threads >= 1.
void encode_array(FormatId format, std::span<const float> in, std::span<std::uint8_t> codes, const Policy& policy,
                  int threads = 1);
void encode_array_bf16(FormatId format, std::span<const std::uint16_t> in, std::span<std::uint8_t> codes,
                       const Policy& policy, int threads = 1);
void encode_array_f16(FormatId format, std::span<const std::uint16_t> in, std::span<std::uint8_t> codes,
                      const Policy& policy, int threads = 1);

// The floor a cast is measured against (tools/bench): out[i] = the top byte of in[i]'s bits, by the
// float32 cast's own loop (chunks, threads, vector loads, narrowing, stores) with no arithmetic: what
// reading float32 and writing one byte per element costs. out.size() must equal in.size().
void streaming_floor(std::span<const float> in, std::span<std::uint8_t> out, int threads = 1);

// The dequantizers' floor, the other way: out[i] = the float32 whose bits are in[i] << 24, in the
// same chunks and threads, vector loads widened to 32-bit lanes and vector stores: what reading one
// byte and writing one float32 per element costs (a dequantizer writes four bytes per element where
// streaming_floor writes one). out.size() must equal in.size().
void widening_floor(std::span<const std::uint8_t> in, std::span<float> out, int threads = 1);

namespace scalar {
void encode_array(FormatId format, std::span<const float> in, std::span<std::uint8_t> codes, const Policy& policy);
void encode_array_bf16(FormatId format, std::span<const std::uint16_t> in, std::span<std::uint8_t> codes,
                       const Policy& policy);
void encode_array_f16(FormatId format, std::span<const std::uint16_t> in, std::span<std::uint8_t> codes,
                      const Policy& policy);
}  // namespace scalar

}  // namespace lowbit::fp8
