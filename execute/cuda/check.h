// Every CUDA, cuBLAS and NCCL call of the CUDA backend goes through Check,
// which throws CudaError naming the call on failure; the runtime catches it
// and fails the run naming the op (exit code 1).
//
//   TP_CUDA(cudaMallocAsync(&p, bytes, stream));
//   Launch(kernel, "relu forward", grid, block, 0, stream, args...);
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace twinpipe::execute::cuda {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void Check(cudaError_t status, const char* what);
void Check(cublasStatus_t status, const char* what);
void Check(ncclResult_t status, const char* what);

#define TP_CUDA(call) ::twinpipe::execute::cuda::Check((call), #call)

// Blocks for n elements, capped (kernels loop with a grid stride).
inline unsigned Blocks(long long n, unsigned threads = 256) {
  const long long b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

}  // namespace twinpipe::execute::cuda
