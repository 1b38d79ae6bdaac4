// The adapter of cuda_fp8_host.hpp: the one translation unit that includes the toolkit's cuda_fp8.h.
// Compiled as host C++ (no __CUDACC__, no __CUDA_ARCH__), so every conversion takes the header's
// software path, with the project's FP rules (-ffp-contract=off, no fast-math).
#include "cuda_fp8_host.hpp"

#include <cuda_fp8.h>

#if defined(__CUDACC__) || defined(__CUDA_ARCH__)
#error "the host adapter must be compiled as host C++: with nvcc the header would take other paths"
#endif

namespace lowbit::cuda_host {

namespace {

__nv_saturation_t saturation(Saturation s) { return s == Saturation::SatFinite ? __NV_SATFINITE : __NV_NOSAT; }
__nv_fp8_interpretation_t interpretation(fp8::FormatId f) { return f == fp8::FormatId::E4M3FN ? __NV_E4M3 : __NV_E5M2; }

}  // namespace

std::string_view saturation_name(Saturation s) { return s == Saturation::SatFinite ? "__NV_SATFINITE" : "__NV_NOSAT"; }

std::string_view toolkit_version() { return LOWBIT_CUDA_TOOLKIT_VERSION; }

std::uint8_t float_to_fp8(float x, Saturation s, fp8::FormatId f) {
  return __nv_cvt_float_to_fp8(x, saturation(s), interpretation(f));
}

std::uint8_t double_to_fp8(double x, Saturation s, fp8::FormatId f) {
  return __nv_cvt_double_to_fp8(x, saturation(s), interpretation(f));
}

std::uint8_t bf16_to_fp8(std::uint16_t bits, Saturation s, fp8::FormatId f) {
  __nv_bfloat16_raw raw;
  raw.x = bits;
  return __nv_cvt_bfloat16raw_to_fp8(raw, saturation(s), interpretation(f));
}

std::uint8_t f16_to_fp8(std::uint16_t bits, Saturation s, fp8::FormatId f) {
  __half_raw raw;
  raw.x = bits;
  return __nv_cvt_halfraw_to_fp8(raw, saturation(s), interpretation(f));
}

std::uint16_t fp8_to_f16(std::uint8_t code, fp8::FormatId f) { return __nv_cvt_fp8_to_halfraw(code, interpretation(f)).x; }

std::uint8_t fp8_from_float_constructor(float x, fp8::FormatId f) {
  return f == fp8::FormatId::E4M3FN ? __nv_fp8_e4m3(x).__x : __nv_fp8_e5m2(x).__x;
}

std::uint8_t fp8_from_double_constructor(double x, fp8::FormatId f) {
  return f == fp8::FormatId::E4M3FN ? __nv_fp8_e4m3(x).__x : __nv_fp8_e5m2(x).__x;
}

}  // namespace lowbit::cuda_host
