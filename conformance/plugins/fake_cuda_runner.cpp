// A stand-in for liblowbit_cuda_runner.so (lowbit/cuda_runner.h) that needs no GPU: it "finds" a device
// with fixed properties and runs the kernel on the host buffers it is given, with a fixed kernel time.
// With it, test_verify drives verify's whole CUDA path (the probe, the runner's calls in the child,
// the device and kernel times in the reports, a device failure per case) on a machine without CUDA.
// LOWBIT_FAKE_CUDA=no-device: the probe fails as a machine without a GPU does; =fault: every run
// fails as after a kernel that faulted.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowbit/cuda_runner.h"

namespace {
bool mode(const char* m) {
  const char* v = getenv("LOWBIT_FAKE_CUDA");
  return v && strcmp(v, m) == 0;
}
}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT int32_t lowbit_cuda_probe_v1(lowbit_cuda_device* device, char* error, uint64_t capacity) {
  if (mode("no-device")) return snprintf(error, capacity, "cudaGetDeviceCount: no CUDA-capable device is detected"), 100;
  memset(device, 0, sizeof *device);
  snprintf(device->name, sizeof device->name, "lowbit fake device");
  device->major = 9;
  device->minor = 0;
  device->driver_version = 13010;
  device->runtime_version = 13000;
  return 0;
}

extern "C" LOWBIT_PLUGIN_EXPORT int32_t lowbit_cuda_run_v1(lowbit_run_fn run, const lowbit_tensor* inputs, int32_t input_count,
                                                          const char* params_json, lowbit_tensor* outputs, int32_t output_count,
                                                          int32_t* kernel_status, char* kernel_message,
                                                          uint64_t kernel_message_capacity, float* kernel_ms, char* error,
                                                          uint64_t error_capacity) {
  *kernel_status =
      run(inputs, input_count, params_json, outputs, output_count, kernel_message, kernel_message_capacity);
  if (mode("fault"))
    return snprintf(error, error_capacity, "cudaDeviceSynchronize after the kernel: an illegal memory access was encountered"), 1;
  *kernel_ms = 0.25f;
  return 0;
}
