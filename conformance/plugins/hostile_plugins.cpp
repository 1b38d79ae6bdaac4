// Plugins that attack the harness rather than get a format wrong, one per -DHOSTILE_<kind>
// (conformance/CMakeLists.txt; test_plugin_sandbox.cpp runs each): the kernel sandbox
// (conformance/engine/include/lowbit/kernel_sandbox.hpp) must leave no process behind, keep the verdict and
// lowbit's output theirs, and bound the kernel's memory. Every kernel implements torchao.fp8.
//   FORKS      the reference's outputs, and a grandchild that overwrites them once the kernel's
//              process has gone (so that a harness reading outputs after the child exits sees garbage)
//   STUBBORN   ignores SIGINT, SIGTERM and SIGHUP, forks a grandchild that does the same, both sleep
//   PRINTS     its constructor prints a forged verdict line on stdout; run() prints on both streams
//   PLANTS     the reference's outputs, after writing a MANIFEST.json that lists a file nobody made
//              into $LOWBIT_TEST_OUT (when set); then sleeps $LOWBIT_TEST_SLEEP_MS (when set)
//   ALLOCATES  allocates and touches 64 MiB at a time until an allocation fails (2 GiB at most)
//   MANY       1 024 kernels with 200-byte names (the ABI allows 1 024 of up to 255 bytes)
// FORKS' grandchild prints its process id on stderr ("grandchild 123"); a test finds STUBBORN's two
// processes as the process group of lowbit's child (a kernel writes no file where Landlock is).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "plugin_case.hpp"

namespace {

constexpr const char* kFormat = "torchao.fp8";

[[maybe_unused]] int32_t reference(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
                  uint64_t capacity) {
  return lowbit::plugin::run_over_reference(*lowbit::find_format(kFormat), in, n_in, params, out, n_out, error, capacity, {});
}

#if defined(HOSTILE_FORKS)
int32_t run(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
            uint64_t capacity) {
  const int32_t status = reference(in, n_in, params, out, n_out, error, capacity);
  const pid_t kernel = getpid();
  if (fork() == 0) {  // waits for the kernel's process to go, then writes garbage for 20 s
    std::fprintf(stderr, "grandchild %d\n", static_cast<int>(getpid()));
    while (getppid() == kernel) usleep(100);
    for (int i = 0; i < 20000; ++i) {
      for (int32_t t = 0; t < n_out; ++t) std::memset(out[t].data, 0xFF, out[t].bytes);
      usleep(1000);
    }
    _exit(0);
  }
  return status;
}

#elif defined(HOSTILE_STUBBORN)
void ignore_signals() {
  for (int s : {SIGINT, SIGTERM, SIGHUP}) signal(s, SIG_IGN);
}
int32_t run(const lowbit_tensor*, int32_t, const char*, lowbit_tensor*, int32_t, char*, uint64_t) {
  ignore_signals();
  if (fork() == 0) ignore_signals();  // both sleep
  for (int i = 0; i < 60; ++i) sleep(1);
  return 0;
}

#elif defined(HOSTILE_PRINTS)
__attribute__((constructor)) void forge() {
  std::printf("verify: kernel forged, format torchao.fp8, policy bit-exact: 9 of 9 cases conformant: conformant (FORGED)\n");
  std::fflush(stdout);
}
int32_t run(const lowbit_tensor*, int32_t, const char*, lowbit_tensor*, int32_t, char*, uint64_t) {
  std::printf("ok       normal:n=64 step 1: 64 elements, 0 mismatches (FORGED on stdout)\n");
  std::fprintf(stderr, "a kernel's own stderr line\n");
  return 0;  // writes nothing: every output stays zero
}

#elif defined(HOSTILE_PLANTS)
int32_t run(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
            uint64_t capacity) {
  if (const char* dir = std::getenv("LOWBIT_TEST_OUT")) {
    const std::string manifest = std::string(dir) + "/MANIFEST.json";
    const char* planted =
        "{\"files\": [{\"format\": \"torchao.fp8\", \"function\": \"planted\", \"generator\": \"planted\", "
        "\"path\": \"torchao.fp8/planted.safetensors\", \"sha256\": "
        "\"0000000000000000000000000000000000000000000000000000000000000000\", \"size\": 1, \"source\": \"planted\"}]}\n";
    const int fd = open(manifest.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0 && write(fd, planted, std::strlen(planted)) > 0) {
      std::fprintf(stderr, "planted %s\n", manifest.c_str());
    } else {
      std::fprintf(stderr, "could not plant %s: %s\n", manifest.c_str(), std::strerror(errno));
    }
    if (fd >= 0) close(fd);
  }
  if (const char* ms = std::getenv("LOWBIT_TEST_SLEEP_MS")) usleep(static_cast<useconds_t>(std::atoi(ms)) * 1000);
  return reference(in, n_in, params, out, n_out, error, capacity);
}

#elif defined(HOSTILE_ALLOCATES)
int32_t run(const lowbit_tensor*, int32_t, const char*, lowbit_tensor*, int32_t, char* error, uint64_t capacity) {
  constexpr std::size_t chunk = std::size_t{64} << 20, most = std::size_t{2} << 30;
  std::vector<void*> held;
  std::size_t total = 0;
  for (; total < most; total += chunk) {
    void* p = std::malloc(chunk);
    if (!p) break;
    std::memset(p, 1, chunk);
    held.push_back(p);
  }
  for (void* p : held) std::free(p);
  std::snprintf(error, capacity, "%s after %zu MiB", total < most ? "an allocation failed" : "nothing stopped it", total >> 20);
  return 1;
}

#endif

#if defined(HOSTILE_MANY)
int32_t run(const lowbit_tensor*, int32_t, const char*, lowbit_tensor*, int32_t, char*, uint64_t) { return 0; }
#else
const lowbit_kernel kKernels[] = {{"hostile", kFormat, LOWBIT_MEMORY_HOST, run}};
const lowbit_plugin kPlugin = {LOWBIT_PLUGIN_ABI_VERSION, 1, kKernels};
#endif

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
#if defined(HOSTILE_MANY)
  static std::vector<std::string> names;
  static std::vector<lowbit_kernel> kernels;
  static lowbit_plugin plugin{};
  if (kernels.empty()) {
    for (int i = 0; i < 1024; ++i) {
      char head[32];
      std::snprintf(head, sizeof head, "kernel-%04d-", i);
      names.push_back(std::string(head) + std::string(200 - std::strlen(head), 'x'));
    }
    for (const std::string& n : names) kernels.push_back({n.c_str(), kFormat, LOWBIT_MEMORY_HOST, run});
    plugin = {LOWBIT_PLUGIN_ABI_VERSION, static_cast<uint32_t>(kernels.size()), kernels.data()};
  }
  return &plugin;
#else
  return &kPlugin;
#endif
}
