#pragma once
// Codebooks ("qmaps"): the dynamic maps of torchao and bitsandbytes, torchao's 4-bit maps and
// bitsandbytes' linear map, generated exactly as the official Python computes them in float32,
// and the searches that map a normalized value to a code. docs/formats/torchao-codebook.md (tables,
// torchao's search) and docs/formats/bnb-blockwise8.md (bitsandbytes' searches) state the
// arithmetic; a table read from a checkpoint or case file is authoritative over a generated one.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace lowbit::codebook {

// torch.linspace on the CPU is start + step*k below the halfway index and end - step*(n-1-k)
// above it; whether the multiply-add is fused depends on the build (FMA on x86 AVX2/AVX-512,
// aarch64, macOS; not with MSVC or ATEN_CPU_CAPABILITY=default).
enum class Linspace { Fma, NoFma };

// Reference: torch >= 2.0 aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp linspace_kernel (float32).
std::vector<float> torch_linspace_f32(float start, float end, std::int64_t steps, Linspace variant);

// Reference: bitsandbytes 0.50 functional.py create_dynamic_map / torchao 0.18 optim/quant_utils.py
// create_dynamic_map (float32 linspace, float32 scalar multiply, sorted; bnb pads to 256 with zeros).
std::vector<float> dynamic_map(bool is_signed, int max_exponent_bits, int total_bits, Linspace variant,
                               bool pad_to_256);

// The maps the optimizers use, canonical (FMA) variant unless asked.
std::vector<float> signed8(Linspace v = Linspace::Fma);    // create_dynamic_map(True, 7, 8)
std::vector<float> unsigned8(Linspace v = Linspace::Fma);  // create_dynamic_map(False, 7, 8)
// Reference: torchao 0.18 optim/subclass_4bit.py: create_dynamic_map(True, 3, 4).
std::vector<float> torchao_signed4(Linspace v = Linspace::Fma);
// Reference: torchao 0.18 optim/subclass_4bit.py: torch.linspace(0, 1, 17)[1:] (no zero).
std::vector<float> torchao_unsigned4(Linspace v = Linspace::Fma);
// Reference: bitsandbytes 0.50 functional.py create_linear_map(signed, total_bits=8, add_zero=True).
// Not necessarily sorted: the middle element need not be exactly 0.
std::vector<float> bnb_linear_map(bool is_signed, Linspace v = Linspace::Fma);

// ---- Searches: normalized value y -> code index ------------------------------------------------

// Reference: torchao 0.18 optim/quant_utils.py quantize_8bit_with_qmap / quantize_4bit_with_qmap:
// branchless search (start at size/2, halve the step), then up if (y - q[c]) >= (q[c+1] - q[c]) * 0.5,
// capped at the top code. Ties go up; NaN goes to 0. qmap.size() must be 16 or 256.
std::uint8_t torchao_search(float y, std::span<const float> qmap);
// The index c that search reaches before its last step (the rounding between c and c + 1): the fast
// path's bucket table (blockwise.cpp) is built from it.
std::size_t torchao_bracket(float y, std::span<const float> qmap);
// The search's last step from that bracket: torchao_search(y, q) is
// torchao_last_step(y, torchao_bracket(y, q), q) (the table's build computes the bracket once).
std::uint8_t torchao_last_step(float y, std::size_t c, std::span<const float> qmap);

// Reference: bitsandbytes 0.50 csrc/kernels.cu dQuantize<0> / quantize_2D, as the rule shown equal to
// them (docs/formats/bnb-blockwise8.md#the-cuda-kernels): bracket q[i] <= y < q[i+1], midpoint
// (q[i] + q[i+1]) * 0.5, ties to the even index, NaN to 0. IEEE arithmetic (the kernel's
// --use_fast_math is not modelled here).
std::uint8_t bnb_cuda_search(float y, std::span<const float> qmap);

// Reference: bitsandbytes <= 0.45 csrc/cpu_ops.cpp lookup_code_index: nearest by std::lower_bound,
// comparing |y - q[lo]| with |q[hi] - y|; ties to the lower index.
std::uint8_t bnb_cpu_exact_search(float y, std::span<const float> qmap);

// Reference: bitsandbytes 0.50 backends/default/ops.py: bucketize(y, (q[j] + q[j+1]) / 2,
// right=False): the number of midpoints strictly below y (ties to the lower index). qmap sorted,
// as bitsandbytes assumes. NaN gets the last code: bucketize puts NaN after every boundary.
std::uint8_t bnb_default_search(float y, std::span<const float> qmap);

// Reference: bitsandbytes >= 0.49 (PR #1901) csrc/cpu_ops.cpp build_quantize_lut / quantize_cpu_impl:
// a 65536-entry table indexed by round((clamp(y,-1,1) + 1) / 2 * 65535).
class BnbCpuLut {
 public:
  explicit BnbCpuLut(std::span<const float> qmap);
  std::uint8_t operator()(float y) const;
  static std::uint16_t index_of(float y);
  // The table itself (65 536 codes, by index_of), for the vectorized quantizer; 3 zero bytes follow
  // its last entry in memory, so that a 32-bit gather at any entry's offset stays in bounds.
  std::span<const std::uint8_t> table() const { return std::span<const std::uint8_t>(table_).first(65536); }

 private:
  std::vector<std::uint8_t> table_;
};

// Exact nearest neighbour (y against the exact midpoint of its bracketing entries, in double), ties
// to the lower or upper index. qmap must be sorted.
enum class Ties { Lower, Upper };
std::uint8_t exact_nearest(float y, std::span<const float> qmap, Ties ties);

}  // namespace lowbit::codebook
