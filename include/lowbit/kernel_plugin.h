/* The kernel plugin ABI, version 1: how a kernel under review plugs into `lowbit verify`.
 *
 * A plugin is a shared library exporting one C function, lowbit_plugin_v1, that returns a table of
 * kernels. Each kernel names the registered format it implements (`lowbit golden generate --format
 * list`) and a run function. The harness makes the inputs, allocates every output from the format's
 * schema (dtype and shape as the reference produces them, zero-filled), calls run once per case in a
 * child process with a time limit, and compares the outputs with the reference's bit for bit.
 *
 * That child is a sandbox (docs/verifying-a-kernel.md, "The sandbox"): a process group of its own,
 * killed whole as soon as run returns (nothing a kernel forks outlives the call); stdout and stderr
 * shown on lowbit's stderr prefixed "kernel| "; an address-space limit for host kernels
 * (--kernel-memory) and a CPU-time limit; no file a kernel can write where Linux has Landlock.
 *
 * Plain C: no C++ types and no exceptions cross this boundary (a C++ kernel catches its own and
 * returns a status). Every pointer the harness passes stays valid for the duration of the call only.
 * docs/verifying-a-kernel.md has a worked example; conformance/mutants/ holds plugins to copy from.
 */
#ifndef LOWBIT_KERNEL_PLUGIN_H
#define LOWBIT_KERNEL_PLUGIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOWBIT_PLUGIN_ABI_VERSION 1u

/* Element types, as the safetensors dtype names of a case file. Values are fixed forever. */
typedef enum lowbit_dtype {
  LOWBIT_F32 = 0,
  LOWBIT_F16 = 1,
  LOWBIT_BF16 = 2,
  LOWBIT_U8 = 3,
  LOWBIT_F8_E4M3 = 4,
  LOWBIT_F8_E5M2 = 5,
  LOWBIT_I32 = 6,
  LOWBIT_I64 = 7
} lowbit_dtype;

/* Where a kernel's tensors live.
 * HOST: every `data` pointer is host memory of the harness's process.
 * CUDA: every `data` pointer is device memory of CUDA device 0, allocated by the harness with cudaMalloc
 *   (inputs copied in, outputs zero-filled); `shape`, `name` and params_json stay host memory. run() is
 *   called on the host thread and launches its work on the legacy default stream (stream 0); it may
 *   return before that work is done: the harness records a CUDA event before and after the call,
 *   synchronizes the device and checks cudaGetLastError, then copies the outputs back. A launch error
 *   is seen by the plugin's own CUDA runtime only (a plugin links its runtime statically): check
 *   cudaGetLastError() after launching and return nonzero with its message. The harness refuses a CUDA
 *   kernel with one line (exit 2) where it has no CUDA runner or finds no device.
 * device/kernels/ holds CUDA kernels over this ABI (cuda_perblock_plugin.cu, blockwise_plugin.cu). */
typedef enum lowbit_memory { LOWBIT_MEMORY_HOST = 0, LOWBIT_MEMORY_CUDA = 1 } lowbit_memory;

/* One tensor of a case: little-endian, row-major, contiguous; bytes = element count * dtype size. */
typedef struct lowbit_tensor {
  const char* name;      /* the format's tensor name: "input", "qmap", "codes", "exp_avg.codes", ... */
  int32_t dtype;         /* a lowbit_dtype */
  int32_t rank;          /* number of dimensions, 0 for a scalar */
  const int64_t* shape;  /* rank entries */
  void* data;            /* host or device memory (the kernel's memory kind); inputs: read only; outputs:
                            the kernel writes every byte */
  uint64_t bytes;
} lowbit_tensor;

/* Runs the kernel on one case. inputs: the format's input tensors present in the case (their order is
 * unspecified: find them by name). params_json: the case's params over the format's defaults, a JSON
 * object (e.g. {"block_size":256}). outputs: the format's outputs, allocated by the harness. Returns 0
 * on success; otherwise writes a NUL-terminated message of at most error_capacity bytes (including the
 * NUL) to error and returns nonzero: the case is reported not conformant with that message. */
typedef int32_t (*lowbit_run_fn)(const lowbit_tensor* inputs, int32_t input_count, const char* params_json,
                                 lowbit_tensor* outputs, int32_t output_count, char* error, uint64_t error_capacity);

typedef struct lowbit_kernel {
  const char* name;    /* unique in the table; what --kernel LIB:NAME selects */
  const char* format;  /* the registered format it implements */
  int32_t memory;      /* a lowbit_memory */
  lowbit_run_fn run;
} lowbit_kernel;

typedef struct lowbit_plugin {
  uint32_t abi_version;  /* LOWBIT_PLUGIN_ABI_VERSION */
  uint32_t kernel_count; /* 1 to 1024 */
  const lowbit_kernel* kernels;
} lowbit_plugin;

/* The one symbol a plugin exports. The table it returns must stay valid while the library is loaded. */
typedef const lowbit_plugin* (*lowbit_plugin_entry_fn)(void);
#define LOWBIT_PLUGIN_ENTRY "lowbit_plugin_v1"

#if defined(_WIN32)
#define LOWBIT_PLUGIN_EXPORT __declspec(dllexport)
#else
#define LOWBIT_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
}
#endif

#endif /* LOWBIT_KERNEL_PLUGIN_H */
