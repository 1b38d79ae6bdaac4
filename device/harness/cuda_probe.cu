// lowbit_cuda_probe_v1 (lowbit/cuda_runner.h): finds device 0 and describes it. One probe for the
// CUDA runner (lowbit verify's device side) and for lowbit-gpu-checks, so that both name a missing
// driver or device, and record the device, the same way. Host code only.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "lowbit/cuda_runner.h"

namespace {

void say(char* out, uint64_t capacity, const std::string& text) {
  if (out && capacity > 0) std::snprintf(out, capacity, "%s", text.c_str());
}

std::string failed(const std::string& what, cudaError_t e) { return what + ": " + cudaGetErrorString(e); }

}  // namespace

extern "C" __attribute__((visibility("default"))) int32_t lowbit_cuda_probe_v1(lowbit_cuda_device* device, char* error,
                                                                               uint64_t error_capacity) {
  // Without the driver library the runtime says "driver version is insufficient": name the real cause.
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(driver);
  } else {
    const char* why = dlerror();
    return say(error, error_capacity, std::string("no CUDA driver: ") + (why ? why : "libcuda.so.1 not found")), 1;
  }
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return say(error, error_capacity, failed("cudaGetDeviceCount", e)), 1;
  if (count < 1) return say(error, error_capacity, "cudaGetDeviceCount: no CUDA device"), 1;
  if ((e = cudaSetDevice(0)) != cudaSuccess) return say(error, error_capacity, failed("cudaSetDevice(0)", e)), 1;
  cudaDeviceProp prop;
  if ((e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess)
    return say(error, error_capacity, failed("cudaGetDeviceProperties(0)", e)), 1;
  int driver = 0, runtime = 0;
  if ((e = cudaDriverGetVersion(&driver)) != cudaSuccess) return say(error, error_capacity, failed("cudaDriverGetVersion", e)), 1;
  if ((e = cudaRuntimeGetVersion(&runtime)) != cudaSuccess)
    return say(error, error_capacity, failed("cudaRuntimeGetVersion", e)), 1;
  std::memset(device, 0, sizeof *device);
  std::snprintf(device->name, sizeof device->name, "%s", prop.name);
  device->major = prop.major;
  device->minor = prop.minor;
  device->driver_version = driver;
  device->runtime_version = runtime;
  device->multiprocessors = prop.multiProcessorCount;
  // Creates the context now: a device that is present but unusable (busy, exclusive, out of memory)
  // is refused here, before any case, rather than on every case.
  if ((e = cudaFree(nullptr)) != cudaSuccess) return say(error, error_capacity, failed("creating a context on device 0", e)), 1;
  return 0;
}
