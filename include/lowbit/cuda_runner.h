/* The CUDA runner: the one piece of lowbit that talks to the CUDA runtime, a shared library of its own
 * (liblowbit_cuda_runner.so, device/harness/) so that the engine and the lowbit command build and run
 * where there is no CUDA toolkit. The plugin host (conformance/engine/verify/plugin_host.cpp) loads it with dlopen
 * in the child process that runs a kernel declaring LOWBIT_MEMORY_CUDA; nothing in the parent process
 * ever initializes CUDA (a CUDA context does not survive fork).
 *
 * Plain C, as the plugin ABI. Not installed as a header: an internal interface between lowbit and the
 * runner it ships with.
 */
#ifndef LOWBIT_CUDA_RUNNER_H
#define LOWBIT_CUDA_RUNNER_H

#include <stdint.h>

#include "lowbit/kernel_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOWBIT_CUDA_RUNNER_LIBRARY "liblowbit_cuda_runner.so"

/* The device a CUDA kernel ran on (device 0), as the reports record it. */
typedef struct lowbit_cuda_device {
  char name[256];           /* cudaDeviceProp::name */
  int32_t major, minor;     /* compute capability */
  int32_t driver_version;   /* cudaDriverGetVersion: 1000 * major + 10 * minor */
  int32_t runtime_version;  /* cudaRuntimeGetVersion, the runtime linked into the runner */
  int32_t multiprocessors;  /* cudaDeviceProp::multiProcessorCount */
} lowbit_cuda_device;

/* Finds device 0 and describes it. Returns 0, or nonzero with a one-line reason in error
 * ("cudaGetDeviceCount: no CUDA-capable device is detected"). */
typedef int32_t (*lowbit_cuda_probe_fn)(lowbit_cuda_device* device, char* error, uint64_t error_capacity);
#define LOWBIT_CUDA_PROBE "lowbit_cuda_probe_v1"
/* Defined in device/harness/cuda_probe.cu: lowbit finds it in the runner with dlsym,
 * lowbit-gpu-checks links it. */
int32_t lowbit_cuda_probe_v1(lowbit_cuda_device* device, char* error, uint64_t error_capacity);

/* Runs `run` on device 0: every input copied to device memory, every output allocated there and
 * zero-filled, run() called on this (the host) thread, the work bracketed by two CUDA events on the
 * legacy default stream, then cudaDeviceSynchronize and cudaGetLastError, and the outputs copied back
 * into the host buffers of `outputs` (same names, dtypes, shapes and sizes).
 * Returns 0 when CUDA did all that (*kernel_status is then run()'s return, kernel_message its message,
 * *kernel_ms the time between the events); nonzero with a one-line reason in error when a CUDA call
 * failed (then the outputs are not valid). */
typedef int32_t (*lowbit_cuda_run_fn)(lowbit_run_fn run, const lowbit_tensor* inputs, int32_t input_count,
                                      const char* params_json, lowbit_tensor* outputs, int32_t output_count,
                                      int32_t* kernel_status, char* kernel_message, uint64_t kernel_message_capacity,
                                      float* kernel_ms, char* error, uint64_t error_capacity);
#define LOWBIT_CUDA_RUN "lowbit_cuda_run_v1"

#ifdef __cplusplus
}
#endif

#endif /* LOWBIT_CUDA_RUNNER_H */
