#pragma once
// The little of the CUDA runtime the GPU checks use: errors turned into exceptions that name the
// call, device memory owned by a handle, and what the report records about the device.
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "lowbit/cuda_runner.h"

namespace lowbit::gpu {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CudaError(std::string(what) + ": " + cudaGetErrorString(e));
}

// Waits for the launched work and reports a launch or execution error as `what`.
inline void finish(const char* what) {
  check(cudaGetLastError(), what);
  check(cudaDeviceSynchronize(), what);
}

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    check(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)), "cudaMalloc");
    check(cudaMemset(data_, 0, count * sizeof(T)), "cudaMemset");
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return data_; }
  std::size_t count() const { return count_; }
  void to_host(T* host, std::size_t count) const {
    check(cudaMemcpy(host, data_, count * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }
  void from_host(const T* host, std::size_t count) {
    check(cudaMemcpy(data_, host, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }

 private:
  T* data_ = nullptr;
  std::size_t count_;
};

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int driver = 0, runtime = 0;  // CUDA versions as 1000 * major + 10 * minor
  int multiprocessors = 0;
};

// Device 0 as the CUDA runner's probe describes it (device/harness/cuda_probe.cu), or CudaError with
// the probe's one-line reason (no driver, no device, no context).
inline DeviceInfo device_info() {
  lowbit_cuda_device d{};
  char error[512] = "";
  if (lowbit_cuda_probe_v1(&d, error, sizeof error) != 0) throw CudaError(error);
  return {d.name, d.major, d.minor, d.driver_version, d.runtime_version, d.multiprocessors};
}

}  // namespace lowbit::gpu
