// Plugins that are wrong as plugins, one per -DMALFORMED_<kind> (conformance/CMakeLists.txt): the
// loader must refuse each with one line naming the fault (exit 2), or, for a kernel that crashes,
// hangs or fails, verify must report the case not conformant; never may lowbit itself crash.
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <unistd.h>

#include "lowbit/kernel_plugin.h"

namespace {

int32_t run(const lowbit_tensor*, int32_t, const char*, lowbit_tensor*, int32_t, char* error, uint64_t capacity) {
#if defined(MALFORMED_CRASH)
  std::raise(SIGSEGV);
#elif defined(MALFORMED_HANG)
  for (;;) pause();
#elif defined(MALFORMED_STATUS)
  std::snprintf(error, capacity, "this kernel refuses every case");
  return 7;
#endif
  (void)error;
  (void)capacity;
  return 0;  // writes nothing: every output stays zero
}

#if defined(MALFORMED_NO_RUN)
const lowbit_kernel kKernels[] = {{"k", "torchao.fp8", LOWBIT_MEMORY_HOST, nullptr}};
#elif defined(MALFORMED_UNKNOWN_FORMAT)
const lowbit_kernel kKernels[] = {{"k", "no.such.format", LOWBIT_MEMORY_HOST, run}};
#else
const lowbit_kernel kKernels[] = {{"k", "torchao.fp8", LOWBIT_MEMORY_HOST, run}};
#endif

#if defined(MALFORMED_ABI_VERSION)
const lowbit_plugin kPlugin = {99, 1, kKernels};
#elif defined(MALFORMED_NO_KERNELS)
const lowbit_plugin kPlugin = {LOWBIT_PLUGIN_ABI_VERSION, 0, kKernels};
#else
const lowbit_plugin kPlugin = {LOWBIT_PLUGIN_ABI_VERSION, 1, kKernels};
#endif

}  // namespace

#if defined(MALFORMED_LOAD_CRASH)
__attribute__((constructor)) static void crash_on_load() { std::abort(); }
#endif

#if !defined(MALFORMED_NO_ENTRY)
extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) { return &kPlugin; }
#endif
