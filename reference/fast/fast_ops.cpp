#include <xsimd/xsimd.hpp>

#include <atomic>
#include <stdexcept>
#include <string>

#include "fast/fast_ops.hpp"
#include "lowbit/simd_level.hpp"

namespace lowbit::fast {
namespace {

bool cpu_has_avx2_fma() { return xsimd::available_architectures().fma3_avx2 != 0; }

std::atomic<const Ops*> current{nullptr};

}  // namespace

const Ops& ops() {
  const Ops* o = current.load(std::memory_order_acquire);
  if (!o) {
    o = cpu_has_avx2_fma() ? ops_avx2() : ops_sse2();
    current.store(o, std::memory_order_release);
  }
  return *o;
}

}  // namespace lowbit::fast

namespace lowbit::simd {

bool available(Level level) { return level == Level::Sse2 || fast::cpu_has_avx2_fma(); }

Level active() { return &fast::ops() == fast::ops_sse2() ? Level::Sse2 : Level::Avx2; }

void set_level(Level level) {
  if (!available(level)) throw std::invalid_argument("this CPU lacks " + std::string(level_name(level)));
  fast::current.store(level == Level::Sse2 ? fast::ops_sse2() : fast::ops_avx2(), std::memory_order_release);
}

std::string_view level_name(Level level) { return level == Level::Sse2 ? "sse2" : "avx2+fma"; }

}  // namespace lowbit::simd
