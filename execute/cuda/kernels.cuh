// Device-side helpers shared by the CUDA layers' kernels.
#pragma once

#include "execute/cuda/check.h"

namespace twinpipe::execute::cuda {

constexpr int kThreads = 256;

#define TP_GRID_STRIDE(i, n)                                                               \
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<long long>(gridDim.x) * blockDim.x)

// Sum of v over the block's kThreads threads, in double; every thread gets it.
__device__ inline double BlockSum(double v) {
  __shared__ double s[kThreads];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int o = kThreads / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) s[threadIdx.x] += s[threadIdx.x + o];
    __syncthreads();
  }
  const double r = s[0];
  __syncthreads();
  return r;
}

__device__ inline double BlockMax(double v) {
  __shared__ double s[kThreads];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int o = kThreads / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) s[threadIdx.x] = fmax(s[threadIdx.x], s[threadIdx.x + o]);
    __syncthreads();
  }
  const double r = s[0];
  __syncthreads();
  return r;
}

// Checks the launch just queued, naming the kernel.
inline void Launched(const char* kernel) { Check(cudaGetLastError(), kernel); }

}  // namespace twinpipe::execute::cuda
