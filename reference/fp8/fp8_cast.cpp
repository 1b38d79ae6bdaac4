#include "lowbit/fp8_cast.hpp"

#include <array>
#include <stdexcept>

#include "fast/fast_ops.hpp"
#include "fast/fast_policy.hpp"
#include "lowbit/parallel_blocks.hpp"

namespace lowbit::fp8 {

namespace {

void require_same_size(std::size_t in, std::size_t out) {
  if (in != out) throw std::invalid_argument("FP8 cast: " + std::to_string(in) + " inputs but room for " +
                                             std::to_string(out) + " codes");
}

// Work is split in chunks of this many elements, whole chunks per thread.
constexpr std::size_t kChunk = 1 << 16;

template <class Source, class Encode>
void scalar_loop(std::span<const Source> in, std::span<std::uint8_t> codes, Encode encode) {
  require_same_size(in.size(), codes.size());
  for (std::size_t i = 0; i < in.size(); ++i) codes[i] = encode(in[i]);
}

}  // namespace

namespace scalar {

void encode_array(FormatId format, std::span<const float> in, std::span<std::uint8_t> codes, const Policy& policy) {
  dispatch(format, [&](auto traits) {
    scalar_loop(in, codes, [&](float x) { return encode_nearest_even<decltype(traits)>(x, policy); });
  });
}

void encode_array_bf16(FormatId format, std::span<const std::uint16_t> in, std::span<std::uint8_t> codes,
                       const Policy& policy) {
  dispatch(format, [&](auto traits) {
    scalar_loop(in, codes, [&](std::uint16_t h) { return encode_nearest_even_bf16<decltype(traits)>(h, policy); });
  });
}

void encode_array_f16(FormatId format, std::span<const std::uint16_t> in, std::span<std::uint8_t> codes,
                      const Policy& policy) {
  dispatch(format, [&](auto traits) {
    scalar_loop(in, codes, [&](std::uint16_t h) { return encode_nearest_even_f16<decltype(traits)>(h, policy); });
  });
}

}  // namespace scalar

namespace {

// A vector kernel (fast_ops.hpp: encode_e4m3's signature) over n inputs, kChunk of them per range
// of a thread, 1 024 at a time: floats(start, count, buffer) gives the inputs as float32 (the input
// itself, or widened into the buffer).
using Kernel = decltype(fast::Ops::encode_e4m3);

template <class Floats>
void run_chunks(Kernel kernel, std::size_t n, std::span<std::uint8_t> codes, const fast::EncodeConstants& k,
                int threads, const Floats& floats) {
  require_same_size(n, codes.size());
  parallel::for_block_ranges((n + kChunk - 1) / kChunk, threads, [&](std::size_t first, std::size_t end) {
    std::array<float, 1024> buffer;
    for (std::size_t start = first * kChunk, stop = std::min(end * kChunk, n); start < stop;) {
      const std::size_t count = std::min(buffer.size(), stop - start);
      kernel(floats(start, count, buffer.data()), 1.0f, codes.data() + start, count, k);
      start += count;
    }
  });
}

// The format's vector kernel under the policy, by run_chunks.
template <class Floats>
void fast_encode(FormatId format, std::size_t n, std::span<std::uint8_t> codes, const Policy& policy, int threads,
                 const Floats& floats) {
  const fast::Ops& ops = fast::ops();
  run_chunks(format == FormatId::E4M3FN ? ops.encode_e4m3 : ops.encode_e5m2, n, codes,
             fast::encode_constants(format, policy), threads, floats);
}

auto direct(std::span<const float> in) {
  return [in](std::size_t start, std::size_t, float*) { return in.data() + start; };
}

}  // namespace

void encode_array(FormatId format, std::span<const float> in, std::span<std::uint8_t> codes, const Policy& policy,
                  int threads) {
  fast_encode(format, in.size(), codes, policy, threads, direct(in));
}

void streaming_floor(std::span<const float> in, std::span<std::uint8_t> out, int threads) {
  run_chunks(fast::ops().top_bytes, in.size(), out, fast::EncodeConstants{}, threads, direct(in));
}

void widening_floor(std::span<const std::uint8_t> in, std::span<float> out, int threads) {
  require_same_size(in.size(), out.size());
  const auto widen_bytes = fast::ops().widen_bytes;
  parallel::for_block_ranges((in.size() + kChunk - 1) / kChunk, threads, [&](std::size_t first, std::size_t end) {
    const std::size_t start = first * kChunk, stop = std::min(end * kChunk, in.size());
    widen_bytes(in.data() + start, out.data() + start, stop - start);
  });
}

void encode_array_bf16(FormatId format, std::span<const std::uint16_t> in, std::span<std::uint8_t> codes,
                       const Policy& policy, int threads) {
  // bf16 widens exactly by a shift (float_bits.hpp widen_bf16)
  fast_encode(format, in.size(), codes, policy, threads, [&](std::size_t start, std::size_t count, float* buffer) {
    for (std::size_t j = 0; j < count; ++j) buffer[j] = widen_bf16(in[start + j]);
    return static_cast<const float*>(buffer);
  });
}

void encode_array_f16(FormatId format, std::span<const std::uint16_t> in, std::span<std::uint8_t> codes,
                      const Policy& policy, int threads) {
  require_same_size(in.size(), codes.size());
  // Every f16 input's code, from the scalar encoder: 2^16 encodes, worth it from about that many
  // inputs; below, the scalar loop itself.
  if (in.size() < (std::size_t{1} << 16)) return scalar::encode_array_f16(format, in, codes, policy);
  std::vector<std::uint8_t> table(std::size_t{1} << 16);
  std::vector<std::uint16_t> all(table.size());
  for (std::size_t h = 0; h < all.size(); ++h) all[h] = static_cast<std::uint16_t>(h);
  scalar::encode_array_f16(format, all, table, policy);
  const std::size_t chunks = (in.size() + kChunk - 1) / kChunk;
  parallel::for_block_ranges(chunks, threads, [&](std::size_t first, std::size_t end) {
    for (std::size_t i = first * kChunk, stop = std::min(end * kChunk, in.size()); i < stop; ++i) codes[i] = table[in[i]];
  });
}

}  // namespace lowbit::fp8
