// The plugin the plugin-host fuzzer loads (conformance/fuzz/fuzz_plugin_host.cpp): its table and what its
// kernels do come from the fuzzer's input, which the fuzzer passes in $LOWBIT_FUZZ_PLUGIN (hex).
// The table: any ABI version, 0 to 1 025 kernels or a huge count, names and formats of random bytes
// (invalid UTF-8, 255 and 256 bytes, duplicates, null), any memory kind, null run functions, a null
// table. The kernels: the expected outputs (copied from the fuzzer's memory: the child is a fork of it
// and $LOWBIT_FUZZ_EXPECTED is the address of fuzz_plugin_expected.hpp's table), random statuses and
// unterminated messages, garbage outputs, exit and _exit with any code, signals, short sleeps, forked
// children that outlive the call, floods of output, lies in the tensor structs, setsid and
// kill(0, SIGKILL).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../fuzz/fuzz_plugin_expected.hpp"
#include "lowbit/kernel_plugin.h"

namespace {

struct Script {
  std::vector<std::uint8_t> bytes;
  std::size_t at = 0;
  std::uint8_t byte() { return at < bytes.size() ? bytes[at++] : 0; }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | byte();
    return v;
  }
};

Script read_script() {
  Script s;
  const char* hex = std::getenv("LOWBIT_FUZZ_PLUGIN");
  for (std::size_t i = 0; hex && hex[i] && hex[i + 1]; i += 2) {
    char two[3] = {hex[i], hex[i + 1], 0};
    s.bytes.push_back(static_cast<std::uint8_t>(std::strtoul(two, nullptr, 16)));
  }
  return s;
}

struct Behaviour {
  std::uint8_t action = 0, a = 0, b = 0;
  std::uint32_t value = 0;
};
std::vector<Behaviour> behaviours;  // one a kernel (of the first 8: kernel i behaves as i % 8)

void copy_expected(lowbit_tensor* out, int32_t n_out) {
  const char* address = std::getenv("LOWBIT_FUZZ_EXPECTED");
  if (!address) return;
  const auto* expected = reinterpret_cast<const lowbit_fuzz::Expected*>(std::strtoull(address, nullptr, 16));
  for (int32_t i = 0; i < n_out; ++i)
    for (std::size_t j = 0; j < expected->count; ++j)
      if (std::strcmp(out[i].name, expected->tensors[j].name) == 0)
        std::memcpy(out[i].data, expected->tensors[j].data, std::min<std::uint64_t>(out[i].bytes, expected->tensors[j].bytes));
}

int32_t behave(const Behaviour& k, lowbit_tensor* out, int32_t n_out, char* error, uint64_t capacity) {
  switch (k.action % 12) {
    case 0:
      copy_expected(out, n_out);
      return 0;
    case 1:  // a status and a message that fills the buffer, unterminated
      std::memset(error, 'A' + k.a % 26, capacity);
      return static_cast<int32_t>(k.value);
    case 2:
      for (int32_t i = 0; i < n_out; ++i) std::memset(out[i].data, k.a, out[i].bytes);
      return 0;
    case 3:
      copy_expected(out, n_out);
      if (n_out > 0 && out[0].bytes > 0) static_cast<std::uint8_t*>(out[0].data)[k.value % out[0].bytes] ^= k.a | 1;
      return 0;
    case 4: _exit(k.a);
    case 5: std::exit(k.a);
    case 6: {
      const int signals[] = {SIGSEGV, SIGABRT, SIGFPE, SIGBUS, SIGKILL, SIGTERM, SIGXCPU, SIGINT};
      raise(signals[k.a % 8]);
      return 0;
    }
    case 7:
      usleep(static_cast<useconds_t>(k.a % 64) * 2000);  // up to 126 ms
      copy_expected(out, n_out);
      return 0;
    case 8:
      if (fork() == 0) {  // outlives the call: sleeps, or writes the outputs
        for (int i = 0; i < 5000; ++i) {
          if (k.b & 1)
            for (int32_t t = 0; t < n_out; ++t) std::memset(out[t].data, 0xFF, out[t].bytes);
          usleep(1000);
        }
        _exit(0);
      }
      copy_expected(out, n_out);
      return 0;
    case 9: {  // a flood of bytes of every value on both streams
      std::string junk(static_cast<std::size_t>(k.a) * 1024 + k.b, '\0');
      for (std::size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>(i * 131 + k.b);
      if (write(1, junk.data(), junk.size()) < 0 || write(2, junk.data(), junk.size() / 2) < 0) return 1;
      copy_expected(out, n_out);
      return 0;
    }
    case 10:  // lies in the structs the harness passed (it reads its own copies)
      copy_expected(out, n_out);
      for (int32_t i = 0; i < n_out; ++i) {
        out[i].bytes = ~0ull;
        out[i].data = nullptr;
        out[i].rank = -1;
        out[i].name = nullptr;
      }
      return 0;
    default:  // leave the group, close the streams, or kill the group
      copy_expected(out, n_out);
      if (setsid() < 0 && (k.a & 1)) setpgid(0, 0);
      if (k.a & 2) close(1), close(2);
      if (k.a & 4) kill(0, SIGKILL);
      return 0;
  }
}

template <int I>
int32_t run_nth(const lowbit_tensor*, int32_t, const char*, lowbit_tensor* out, int32_t n_out, char* error, uint64_t capacity) {
  return behave(behaviours[I % behaviours.size()], out, n_out, error, capacity);
}
const lowbit_run_fn kRuns[8] = {run_nth<0>, run_nth<1>, run_nth<2>, run_nth<3>, run_nth<4>, run_nth<5>, run_nth<6>, run_nth<7>};

const char* const kFormats[] = {"torchao.fp8", "fp8.e4m3fn.satfinite", "bnb.blockwise8.dynamic", "no.such.format"};

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  static std::vector<std::string> strings;
  static std::vector<lowbit_kernel> kernels;
  static lowbit_plugin plugin{};
  Script s = read_script();
  s.byte();  // the host's byte (its time limit)
  const std::uint8_t flags = s.byte();
  if (flags == 0xFF) return nullptr;
  const std::uint8_t abi = s.byte();
  plugin.abi_version = abi < 250 ? LOWBIT_PLUGIN_ABI_VERSION : s.u32();
  const std::uint8_t c = s.byte();
  std::uint32_t count = c < 200 ? c % 4 + 1 : c < 215 ? 0 : c < 235 ? 1024 : c < 245 ? 1025 : s.u32();
  const std::uint32_t made = count <= 1024 ? count : 4;  // the host must refuse a larger count unread
  strings.reserve(2 * made);  // the names' pointers must not move
  for (std::uint32_t i = 0; i < made; ++i) {
    const bool detailed = i < 8;  // kernels past the 8th: plain names, the first kernel's behaviour
    const std::uint8_t n = detailed ? s.byte() : 0;
    const char* name;
    if (n < 128 || !detailed) {
      strings.push_back("k" + std::to_string(i));
      name = strings.back().c_str();
    } else if (n < 200) {
      std::string random(s.byte(), ' ');
      for (char& ch : random) ch = static_cast<char>(s.byte());
      strings.push_back(random);
      name = strings.back().c_str();
    } else if (n < 230) {
      strings.push_back(std::string(n < 215 ? 255 : 256, 'n') + std::to_string(i));
      strings.back().resize(n < 215 ? 255 : 256);
      name = strings.back().c_str();
    } else if (n < 250 && i > 0) {
      name = kernels[i - 1].name;  // a duplicate
    } else {
      name = nullptr;
    }
    const std::uint8_t f = detailed ? s.byte() : 0;
    const char* format = f < 250 ? kFormats[f % 4] : nullptr;
    const std::uint8_t m = detailed ? s.byte() : 0;
    const int32_t memory = m < 230 ? LOWBIT_MEMORY_HOST : m < 250 ? LOWBIT_MEMORY_CUDA : static_cast<int32_t>(s.u32());
    const std::uint8_t r = detailed ? s.byte() : 0;
    if (detailed) behaviours.push_back({s.byte(), s.byte(), s.byte(), s.u32()});
    kernels.push_back({name, format, memory, r < 250 ? kRuns[i % 8] : nullptr});
  }
  if (behaviours.empty()) behaviours.push_back({});
  plugin.kernel_count = count;
  plugin.kernels = flags == 0xFE ? nullptr : kernels.data();
  return &plugin;
}
