#pragma once
// What the plugin-host fuzzer (fuzz_plugin_host.cpp) hands its plugin (plugins/fuzz_plugin.cpp) as
// the expected outputs of the case being run: the plugin's child is a fork of the fuzzer, so the
// address of this table ($LOWBIT_FUZZ_EXPECTED, hex) is valid in it.
#include <cstddef>
#include <cstdint>

namespace lowbit_fuzz {

struct ExpectedTensor {
  const char* name;
  const void* data;
  std::uint64_t bytes;
};

struct Expected {
  std::size_t count = 0;
  ExpectedTensor tensors[16];
};

}  // namespace lowbit_fuzz
