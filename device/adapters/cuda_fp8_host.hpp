#pragma once
// CUDA's own FP8 conversions as the toolkit ships them for the host: cuda_fp8.hpp's software path
// (the code every __host__ __device__ conversion runs off the GPU, and on the GPU below sm_89 or
// without SATFINITE), compiled by the C++ compiler, behind plain functions so that a test needs no
// CUDA header. The functions call the header's own; nothing here re-implements a conversion.
#include <cstdint>
#include <string_view>

#include "lowbit/fp8.hpp"

namespace lowbit::cuda_host {

enum class Saturation { NoSat, SatFinite };  // __NV_NOSAT, __NV_SATFINITE
std::string_view saturation_name(Saturation s);  // "__NV_NOSAT", "__NV_SATFINITE"

// CUDA's four conversion modes, each with the reference policy docs/formats/fp8.md says it
// implements: what the host and the GPU checks hold every CUDA conversion to.
struct Mode {
  fp8::FormatId format;
  Saturation saturation;
  fp8::Policy policy;
};
inline const Mode kModes[] = {
    {fp8::FormatId::E4M3FN, Saturation::NoSat, fp8::cuda_nosat<fp8::E4M3FN>()},
    {fp8::FormatId::E4M3FN, Saturation::SatFinite, fp8::cuda_satfinite()},
    {fp8::FormatId::E5M2, Saturation::NoSat, fp8::cuda_nosat<fp8::E5M2>()},
    {fp8::FormatId::E5M2, Saturation::SatFinite, fp8::cuda_satfinite()},
};

// The toolkit the adapter was compiled against ("13.0.88"), as CMake's FindCUDAToolkit reported it.
std::string_view toolkit_version();

// __nv_cvt_float_to_fp8(x, s, E4M3 | E5M2)
std::uint8_t float_to_fp8(float x, Saturation s, fp8::FormatId f);
// __nv_cvt_double_to_fp8(x, s, ...)
std::uint8_t double_to_fp8(double x, Saturation s, fp8::FormatId f);
// __nv_cvt_bfloat16raw_to_fp8({bits}, s, ...)
std::uint8_t bf16_to_fp8(std::uint16_t bits, Saturation s, fp8::FormatId f);
// __nv_cvt_halfraw_to_fp8({bits}, s, ...)
std::uint8_t f16_to_fp8(std::uint16_t bits, Saturation s, fp8::FormatId f);
// __nv_cvt_fp8_to_halfraw(code, ...).x: the binary16 pattern of a code's value
std::uint16_t fp8_to_f16(std::uint8_t code, fp8::FormatId f);
// The __nv_fp8_e4m3 / __nv_fp8_e5m2 constructors from float and double (their __x member)
std::uint8_t fp8_from_float_constructor(float x, fp8::FormatId f);
std::uint8_t fp8_from_double_constructor(double x, fp8::FormatId f);

}  // namespace lowbit::cuda_host
