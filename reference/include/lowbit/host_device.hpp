#pragma once
// LOWBIT_HOST_DEVICE: a function the reference and our CUDA kernels share (the rules written out once,
// device/kernels/ including the reference's header) is __host__ __device__ under nvcc and a plain
// function elsewhere. One definition for the reference's headers (device/kernels/ieee_ops.cuh repeats
// it, guarded, for the kernels built without them).
#ifndef LOWBIT_HOST_DEVICE
#if defined(__CUDACC__)
#define LOWBIT_HOST_DEVICE __host__ __device__
#else
#define LOWBIT_HOST_DEVICE
#endif
#endif
