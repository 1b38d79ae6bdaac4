#pragma once
// The fast block-wise quantizers' inner loops, one thread over consecutive blocks, for callers that
// split the work themselves (the optimizer steps, optimizer_torchao.cpp and optimizer_bnb.cpp: block
// range by block range, in cache) with what a whole call would set up once: torchao's search table and
// bitsandbytes' lookup table. blockwise.cpp's _into functions are these loops on each thread's range.
// Private to the arithmetic library.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "lowbit/codebook.hpp"

namespace lowbit::blockwise::detail {

// torchao's search table for a codebook (fast_ops.hpp kBucketShift), kept for the last four
// codebooks; null for a call of fewer than search_table_min_elements elements (not worth building).
std::shared_ptr<const std::vector<std::int32_t>> search_buckets(std::span<const float> qmap, std::size_t elements,
                                                                int threads);

// torchao_quantize_into's blocks: x whole blocks, qmap 16 or 256 entries (checked by the caller),
// one scale per block; buckets from search_buckets or null.
void torchao_quantize_blocks(std::span<const float> x, std::span<const float> qmap, std::size_t block_size,
                             const std::int32_t* buckets, std::uint8_t* codes, float* scale);

// bnb_quantize_into's blocks with the CPU lookup table (BnbBackend::CpuLut); the last block may be partial.
void bnb_lut_quantize_blocks(std::span<const float> x, const codebook::BnbCpuLut& lut, std::size_t block_size,
                             std::uint8_t* codes, float* scale);

}  // namespace lowbit::blockwise::detail
