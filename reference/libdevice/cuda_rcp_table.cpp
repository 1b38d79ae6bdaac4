// The measured rcp.approx.ftz.f32 table (reference/data/rcp_approx_ftz_1_2.delta2, measured on an
// NVIDIA H200 with CUDA 13.0 on 2026-12-01: docs/device/README.md), embedded by the assembler.
// Entry m (2 bits, entry m at bits 2*(m%4) of byte m/4) is bits(rcp.approx.ftz(1 + m*2^-23)) minus
// bits(RN(1/(1 + m*2^-23))): 0 -> 0, 1 -> +1 ulp, 2 -> -1 ulp (3 never occurs). The GPU never
// differs from RN(1/b) by more than one ulp on [1, 2).
#include "lowbit/cuda_libdevice.hpp"

#include "lowbit/float_bits.hpp"

#ifndef LOWBIT_RCP_TABLE_PATH  // reference/CMakeLists.txt gives the absolute path; the assembler
#define LOWBIT_RCP_TABLE_PATH "reference/data/rcp_approx_ftz_1_2.delta2"  // fails if it is not there
#endif

// LOWBIT_RCP_TABLE_SHA256 is on the command line only so that a new table makes a new object.
asm(".section .rodata\n"
    ".balign 64\n"
    ".hidden lowbit_rcp_delta2\n"
    ".global lowbit_rcp_delta2\n"
    "lowbit_rcp_delta2:\n"
    ".incbin \"" LOWBIT_RCP_TABLE_PATH "\"\n"
    ".previous\n");

extern "C" const unsigned char lowbit_rcp_delta2[];

namespace lowbit::cuda {

std::uint32_t rcp_approx_ftz_1_2(std::uint32_t m) {
  const float b = float_from_bits(0x3F800000u | (m & 0x007FFFFFu));
  const unsigned code = (lowbit_rcp_delta2[m >> 2] >> (2 * (m & 3u))) & 3u;
  const std::uint32_t rn = bits_of(1.0f / b);
  return code == 1 ? rn + 1 : code == 2 ? rn - 1 : rn;
}

}  // namespace lowbit::cuda
