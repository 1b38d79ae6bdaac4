#pragma once
// Block-wise absmax scaling with quantize and dequantize, for codebook and FP8 states, as each
// official implementation computes them. Blocks are consecutive runs of block_size elements of
// the flattened tensor. docs/formats/torchao-codebook.md and bnb-blockwise8.md state the rules.
#include <cstdint>
#include <span>
#include <vector>

#include "lowbit/codebook.hpp"
#include "lowbit/fp8.hpp"

namespace lowbit::blockwise {

struct Quantized {
  std::vector<std::uint8_t> codes;  // one code per element (4-bit codes unpacked; see pack_nibbles)
  std::vector<float> scale;         // one per block: torchao's scale, or bitsandbytes' absmax
};

// ---- torchao ---------------------------------------------------------------------------------

// Reference: torchao 0.18 optim/quant_utils.py scale_tensor + quantize_8bit_with_qmap /
// quantize_4bit_with_qmap: scale = max(amax|x|, f32(1e-12)) (NaN propagates), y = x / scale,
// code = torchao_search(y). x.size() must be a multiple of block_size (torchao has no tails).
Quantized torchao_quantize(std::span<const float> x, std::span<const float> qmap, std::size_t block_size,
                           int threads = 1);

// Reference: torchao 0.18 optim/quant_utils.py dequant_with_qmap: qmap[code] * scale.
std::vector<float> torchao_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                      std::span<const float> qmap, std::size_t block_size, int threads = 1);

// Reference: torchao 0.18 optim/subclass_fp8.py quantize_fp8: scale = max(amax|x|, f32(1e-12)) / 448
// (true division), codes = e4m3fn(x / scale) under the given torch conversion policy.
Quantized torchao_fp8_quantize(std::span<const float> x, std::size_t block_size, const fp8::Policy& policy,
                               int threads = 1);
// The amax torchao_fp8_quantize divides by 448: max(torch.amax(|block|), f32(1e-12)), NaN propagated
// as torch's canonical 0x7FC00000. Its scale is torchao_fp8_clipped_amax(block) / 448.
float torchao_fp8_clipped_amax(std::span<const float> block);
// How torch widens a NaN float8 code to float32 (fp8::NanWidening): c10's fp8e4m3fn_to_fp32_value
// gives 0x7FF00000 | sign (Payload: CPU capability AVX2 and default, observed); Quiet, 0x7FC00000 |
// sign, is what was documented for the AVX-512 path.
using fp8::NanWidening;

// Reference: torchao 0.18 optim/subclass_fp8.py OptimStateFp8.dequantize: float(code) * scale, with
// torch's NaN payloads: the widened code's NaN per `widening`, and a NaN scale's own payload; where
// both are NaN, the one torch 2.15's CPU multiply returns at the element's place in the block, or with
// blocks of one element (two same-shape tensors) among all the codes (torch_cpu_mul.hpp; vectorized:
// capability AVX2 or AVX-512, else default).
std::vector<float> torchao_fp8_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                          std::size_t block_size, NanWidening widening = NanWidening::Payload,
                                          bool vectorized = true, int threads = 1);

// ---- plain per-block FP8 (lowbit's own: no library; docs/formats/fp8.md "Per-block E4M3") -------

// Reference: lowbit fp8.perblock.e4m3 (docs/formats/fp8.md): per block (the tail may be partial)
// amax = max |x| ignoring NaN, scale = amax / 448 (float32 division); scale 0 (all zeros, or amax
// below 448 * 2^-150): code 0x00, NaN 0x7F; else code = e4m3fn(x / scale), RNE, CUDA satfinite.
Quantized fp8_perblock_quantize(std::span<const float> x, std::size_t block_size, int threads = 1);
// Reference: lowbit fp8.perblock.e4m3: decode(code) * scale (0 * Inf is NaN in a block holding an Inf).
std::vector<float> fp8_perblock_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                           std::size_t block_size, int threads = 1);

// Reference: torchao 0.18 optim/subclass_4bit.py: byte j = (code[2j] << 4) | code[2j+1] (first element high).
std::vector<std::uint8_t> pack_nibbles(std::span<const std::uint8_t> codes);
std::vector<std::uint8_t> unpack_nibbles(std::span<const std::uint8_t> packed, std::size_t count);

// ---- bitsandbytes ----------------------------------------------------------------------------

enum class BnbBackend {
  CpuLut,    // bitsandbytes >= 0.49 (PR #1901) csrc/cpu_ops.cpp quantize_cpu_impl, the default CPU path
  CudaIeee,  // csrc/kernels.cu kQuantizeBlockwise with IEEE arithmetic (no --use_fast_math effects)
  Default,   // backends/default/ops.py: pure PyTorch, bucketize, NaN propagates into absmax
};

// quantize_blockwise: partial tail blocks allowed; the stored scale is the raw absmax.
//   CpuLut: absmax = max |x| over the block ignoring NaN (from 0); absmax 0 -> codes 0; else
//           y = x * (1 / absmax), code = LUT(y).
//   CudaIeee: absmax = max |x| ignoring NaN (from -FLT_MAX); y = x * (1 / absmax); bnb_cuda_search.
//   Default: absmax = max |x| (NaN propagates); full blocks y = clamp(x * (1 / max(absmax, 1e-38)));
//           the tail block divides; bnb_default_search (NaN -> the last code). The NaN absmax is torch's:
//           a full block's max(dim=-1) keeps the first NaN's |x| as it is; the tail's max() gives
//           0xFFFFFFFF when vectorized (CPU capability AVX2, AVX-512) and the tail has two elements or
//           more, a one-element tail's |x| quieted, and when scalar (capability default) the |x|
//           quieted of the NaN in the lowest of 8 lanes (element i in lane i mod 8).
Quantized bnb_quantize(std::span<const float> x, std::span<const float> qmap, std::size_t block_size,
                       BnbBackend backend, bool vectorized_max = true, int threads = 1);

// Reference: bitsandbytes 0.50 csrc/cpu_ops.cpp dequantizeBlockwise8bitCpu (and the CUDA and default
// kernels): qmap[code] * absmax[block].
std::vector<float> bnb_dequantize(std::span<const std::uint8_t> codes, std::span<const float> absmax,
                                  std::span<const float> qmap, std::size_t block_size, int threads = 1);

// ---- Caller-provided outputs -----------------------------------------------------------------
// Every quantizer and dequantizer above with its outputs in the caller's memory; the functions above
// are thin wrappers over these (with the same threads, default 1). Sizes: codes and out as many elements as the input,
// scale one per block (block_count). Nothing is allocated per call (bitsandbytes CPU builds its
// 64 KiB table, as the library does). The blocks are split among `threads` threads (>= 1), each
// block computed whole by one thread, vectorized (simd_level.hpp): the bytes are the scalar
// definitions' (namespace scalar below) for any input and any thread count.
std::size_t block_count(std::size_t elements, std::size_t block_size);

// torchao's codebook search on the fast path reads a 4 MiB table per codebook (built in about 50 ms
// of CPU, kept for the last four codebooks) once this many elements have been searched with that
// codebook (in one call or several: the audit's chunks are smaller), and searches without it before.
// A tuning knob, also for tests (0: always; SIZE_MAX: never): the same bytes either way.
inline std::size_t search_table_min_elements = std::size_t{1} << 22;
// Builds and keeps that table for qmap now (16 or 256 entries; other sizes: nothing), so that a
// later call does not pay for it: a benchmark's untimed warm-up, as torch.compile's compilation is
// for torchao's compiled functions.
void prepare_search_table(std::span<const float> qmap, int threads = 1);

void torchao_quantize_into(std::span<const float> x, std::span<const float> qmap, std::size_t block_size,
                           std::span<std::uint8_t> codes, std::span<float> scale, int threads = 1);
void torchao_dequantize_into(std::span<const std::uint8_t> codes, std::span<const float> scale,
                             std::span<const float> qmap, std::size_t block_size, std::span<float> out, int threads = 1);
void torchao_fp8_quantize_into(std::span<const float> x, std::size_t block_size, const fp8::Policy& policy,
                               std::span<std::uint8_t> codes, std::span<float> scale, int threads = 1);
void torchao_fp8_dequantize_into(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                 std::size_t block_size, NanWidening widening, std::span<float> out, int threads = 1,
                                 bool vectorized = true);
void fp8_perblock_quantize_into(std::span<const float> x, std::size_t block_size, std::span<std::uint8_t> codes,
                                std::span<float> scale, int threads = 1);
void fp8_perblock_dequantize_into(std::span<const std::uint8_t> codes, std::span<const float> scale,
                                  std::size_t block_size, std::span<float> out, int threads = 1);
void bnb_quantize_into(std::span<const float> x, std::span<const float> qmap, std::size_t block_size,
                       BnbBackend backend, bool vectorized_max, std::span<std::uint8_t> codes, std::span<float> scale,
                       int threads = 1);
void bnb_dequantize_into(std::span<const std::uint8_t> codes, std::span<const float> absmax,
                         std::span<const float> qmap, std::size_t block_size, std::span<float> out, int threads = 1);

// The readable definitions, one element at a time on one thread, against which the fast paths are
// tested (conformance/tests/test_fast_paths.cpp). The dequantizers of the codebook formats have no second
// version: qmap[code] * scale is already the whole definition, and the fast path is that loop.
namespace scalar {
void torchao_quantize(std::span<const float> x, std::span<const float> qmap, std::size_t block_size,
                      std::span<std::uint8_t> codes, std::span<float> scale);
void torchao_fp8_quantize(std::span<const float> x, std::size_t block_size, const fp8::Policy& policy,
                          std::span<std::uint8_t> codes, std::span<float> scale);
void torchao_fp8_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale, std::size_t block_size,
                            NanWidening widening, std::span<float> out, bool vectorized = true);
void fp8_perblock_quantize(std::span<const float> x, std::size_t block_size, std::span<std::uint8_t> codes,
                           std::span<float> scale);
void fp8_perblock_dequantize(std::span<const std::uint8_t> codes, std::span<const float> scale,
                             std::size_t block_size, std::span<float> out);
void bnb_quantize(std::span<const float> x, std::span<const float> qmap, std::size_t block_size, BnbBackend backend,
                  bool vectorized_max, std::span<std::uint8_t> codes, std::span<float> scale);
}  // namespace scalar

}  // namespace lowbit::blockwise
