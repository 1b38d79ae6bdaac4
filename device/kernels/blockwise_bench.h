/* What the block-wise CUDA plugin (blockwise_plugin.cu) exports besides its kernels, for the bandwidth
 * check of lowbit-gpu-checks (device/checks/bandwidth_checks.cpp): a plain copy kernel, the yardstick,
 * and a filler of deterministic inputs, both compiled in the plugin's module with its flags. Device
 * pointers; launched on the legacy default stream; 0, or nonzero with a message in error. */
#ifndef LOWBIT_BLOCKWISE_BENCH_H
#define LOWBIT_BLOCKWISE_BENCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lowbit_blockwise_bench {
  int32_t (*copy)(const float* in, float* out, uint64_t n, char* error, uint64_t error_capacity);
  int32_t (*fill)(float* out, uint64_t n, uint32_t seed, char* error, uint64_t error_capacity);
} lowbit_blockwise_bench;

typedef const lowbit_blockwise_bench* (*lowbit_blockwise_bench_fn)(void);
#define LOWBIT_BLOCKWISE_BENCH_ENTRY "lowbit_blockwise_bench_v1"

#ifdef __cplusplus
}
#endif

#endif /* LOWBIT_BLOCKWISE_BENCH_H */
