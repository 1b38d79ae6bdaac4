#pragma once
// The little of the CUDA runtime the GPU checks use: errors turned into exceptions that name the
// call, device memory owned by a handle, and what the report records about the device.
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>

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

// Device 0, or CudaError with the runtime's reason (no driver, no device).
inline DeviceInfo device_info() {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) throw CudaError("cudaGetDeviceCount: no CUDA device");
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  DeviceInfo d;
  d.name = p.name;
  d.major = p.major;
  d.minor = p.minor;
  d.multiprocessors = p.multiProcessorCount;
  check(cudaDriverGetVersion(&d.driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&d.runtime), "cudaRuntimeGetVersion");
  return d;
}

}  // namespace lowbit::gpu
