// The vector kernels for AVX2 with FMA3. This file alone is compiled with -mavx2 -mfma
// (reference/CMakeLists.txt); its functions run only where fast_ops.cpp found both on the CPU.
#include "fast/fast_kernels.hpp"

namespace lowbit::fast {

const Ops* ops_avx2() {
  static const Ops o = Kernels<xsimd::fma3<xsimd::avx2>>::ops("avx2+fma");
  return &o;
}

}  // namespace lowbit::fast
