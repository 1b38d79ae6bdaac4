// The CUDA runner (lowbit/cuda_runner.h): device memory around a CUDA kernel plugin's run function,
// loaded by the plugin host in the child process of one case. Host code only; the CUDA runtime is
// linked in statically (device/harness/CMakeLists.txt), so the runner needs nothing but the driver.
// Its probe of the device is cuda_probe.cu, shared with lowbit-gpu-checks.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "lowbit/cuda_runner.h"

namespace {

void say(char* out, uint64_t capacity, const std::string& text) {
  if (out && capacity > 0) std::snprintf(out, capacity, "%s", text.c_str());
}

// "cudaMalloc of output 'codes' (4096 bytes): out of memory"
std::string failed(const std::string& what, cudaError_t e) { return what + ": " + cudaGetErrorString(e); }

// Device buffers, freed on every path out.
struct DeviceBuffers {
  std::vector<void*> pointers;
  ~DeviceBuffers() {
    for (void* p : pointers) cudaFree(p);
  }
};

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Events() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

// Allocates one tensor's device copy (at least one byte, so that every data pointer is a real one).
cudaError_t allocate(DeviceBuffers& buffers, const lowbit_tensor& t, void** device) {
  const cudaError_t e = cudaMalloc(device, t.bytes > 0 ? t.bytes : 1);
  if (e == cudaSuccess) buffers.pointers.push_back(*device);
  return e;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int32_t lowbit_cuda_run_v1(
    lowbit_run_fn run, const lowbit_tensor* inputs, int32_t input_count, const char* params_json, lowbit_tensor* outputs,
    int32_t output_count, int32_t* kernel_status, char* kernel_message, uint64_t kernel_message_capacity, float* kernel_ms,
    char* error, uint64_t error_capacity) {
  cudaError_t e = cudaSetDevice(0);
  if (e != cudaSuccess) return say(error, error_capacity, failed("cudaSetDevice(0)", e)), 1;
  DeviceBuffers buffers;
  std::vector<lowbit_tensor> in(inputs, inputs + input_count), out(outputs, outputs + output_count);
  for (lowbit_tensor& t : in) {
    void* d = nullptr;
    if ((e = allocate(buffers, t, &d)) != cudaSuccess)
      return say(error, error_capacity, failed("cudaMalloc of input '" + std::string(t.name) + "' (" + std::to_string(t.bytes) + " bytes)", e)), 1;
    if (t.bytes && (e = cudaMemcpy(d, t.data, t.bytes, cudaMemcpyHostToDevice)) != cudaSuccess)
      return say(error, error_capacity, failed("copying input '" + std::string(t.name) + "' to the device", e)), 1;
    t.data = d;
  }
  for (lowbit_tensor& t : out) {
    void* d = nullptr;
    if ((e = allocate(buffers, t, &d)) != cudaSuccess)
      return say(error, error_capacity, failed("cudaMalloc of output '" + std::string(t.name) + "' (" + std::to_string(t.bytes) + " bytes)", e)), 1;
    if ((e = cudaMemset(d, 0, t.bytes > 0 ? t.bytes : 1)) != cudaSuccess)
      return say(error, error_capacity, failed("zero-filling output '" + std::string(t.name) + "'", e)), 1;
    t.data = d;
  }
  Events events;
  if ((e = cudaEventCreate(&events.start)) != cudaSuccess || (e = cudaEventCreate(&events.stop)) != cudaSuccess)
    return say(error, error_capacity, failed("cudaEventCreate", e)), 1;
  // The copies above are synchronous; the kernel starts on an idle device.
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return say(error, error_capacity, failed("cudaDeviceSynchronize before the kernel", e)), 1;
  if ((e = cudaEventRecord(events.start, 0)) != cudaSuccess) return say(error, error_capacity, failed("cudaEventRecord", e)), 1;
  *kernel_status = run(in.data(), input_count, params_json, out.data(), output_count, kernel_message, kernel_message_capacity);
  if ((e = cudaEventRecord(events.stop, 0)) != cudaSuccess)
    return say(error, error_capacity, failed("cudaEventRecord after the kernel", e)), 1;
  // The kernel may return before its work is done: wait for the device, then look for an error it
  // left (a fault in the kernel is sticky and shows here; a launch error is the plugin's own runtime's).
  if ((e = cudaDeviceSynchronize()) != cudaSuccess)
    return say(error, error_capacity, failed("cudaDeviceSynchronize after the kernel", e)), 1;
  if ((e = cudaGetLastError()) != cudaSuccess) return say(error, error_capacity, failed("cudaGetLastError after the kernel", e)), 1;
  if ((e = cudaEventElapsedTime(kernel_ms, events.start, events.stop)) != cudaSuccess)
    return say(error, error_capacity, failed("cudaEventElapsedTime", e)), 1;
  for (int32_t i = 0; i < output_count; ++i)
    if (outputs[i].bytes && (e = cudaMemcpy(outputs[i].data, out[i].data, outputs[i].bytes, cudaMemcpyDeviceToHost)) != cudaSuccess)
      return say(error, error_capacity, failed("copying output '" + std::string(outputs[i].name) + "' back", e)), 1;
  return 0;
}
