#pragma once
// The ABI side of the per-block E4M3 plugins (the CUDA one and its host twin): find the tensors by name,
// check them, read block_size from the params, and hand plain pointers to `compute`. No C++ types or
// exceptions cross the ABI; nothing here touches the tensors' data, so the same glue serves host and
// device memory.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowbit/kernel_plugin.h"

namespace perblock {

// compute(x, n, block_size, codes, scale, dequant, error, capacity): 0, or nonzero with a message.
using ComputeFn = int32_t (*)(const float*, uint64_t, uint64_t, uint8_t*, float*, float*, char*, uint64_t);

inline const lowbit_tensor* find(const lowbit_tensor* t, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (strcmp(t[i].name, name) == 0) return &t[i];
  return nullptr;
}

// {"block_size":128} -> 128; 0 when absent or not a positive integer. The harness passes every param
// of the format resolved over its defaults, as compact JSON.
inline uint64_t block_size_param(const char* params) {
  const char* at = strstr(params, "\"block_size\"");
  if (!at) return 0;
  at += strlen("\"block_size\"");
  while (*at == ' ' || *at == ':') ++at;
  if (*at < '1' || *at > '9') return 0;
  char* end = nullptr;
  const unsigned long long v = strtoull(at, &end, 10);
  return (*end == ',' || *end == '}' || *end == ' ') ? v : 0;
}

inline int32_t run(ComputeFn compute, const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out,
                   int32_t n_out, char* error, uint64_t capacity) {
  const lowbit_tensor* x = find(in, n_in, "input");
  lowbit_tensor* codes = const_cast<lowbit_tensor*>(find(out, n_out, "codes"));
  lowbit_tensor* scale = const_cast<lowbit_tensor*>(find(out, n_out, "scale"));
  lowbit_tensor* dequant = const_cast<lowbit_tensor*>(find(out, n_out, "dequant"));
  if (!x || !codes || !scale || !dequant) return snprintf(error, capacity, "needs input, codes, scale and dequant"), 1;
  const uint64_t block = block_size_param(params);
  if (block == 0) return snprintf(error, capacity, "no positive block_size in the params %s", params), 1;
  const uint64_t n = x->bytes / 4, blocks = (n + block - 1) / block;
  if (x->dtype != LOWBIT_F32 || codes->dtype != LOWBIT_F8_E4M3 || codes->bytes != n || scale->dtype != LOWBIT_F32 ||
      scale->bytes != 4 * blocks || dequant->dtype != LOWBIT_F32 || dequant->bytes != 4 * n)
    return snprintf(error, capacity, "unexpected dtypes or sizes for %llu elements in blocks of %llu",
                    static_cast<unsigned long long>(n), static_cast<unsigned long long>(block)),
           1;
  return compute(static_cast<const float*>(x->data), n, block, static_cast<uint8_t*>(codes->data),
                 static_cast<float*>(scale->data), static_cast<float*>(dequant->data), error, capacity);
}

}  // namespace perblock
