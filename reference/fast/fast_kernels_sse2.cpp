// The vector kernels for SSE2, the instruction set every x86-64 CPU has (the baseline).
#include "fast/fast_kernels.hpp"

namespace lowbit::fast {

const Ops* ops_sse2() {
  static const Ops o = Kernels<xsimd::sse2>::ops("sse2");
  return &o;
}

}  // namespace lowbit::fast
