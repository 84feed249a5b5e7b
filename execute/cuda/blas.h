// A cuBLAS handle with a 32 MiB workspace of its own, both made on the
// current device and freed together. On Hopper cuBLAS picks its fastest GEMM
// kernels only with a large workspace (NVIDIA's advice: 32 MiB there, 4 MiB
// before), and cublasSetStream puts a handle back on cuBLAS's default pool,
// so every call binds the stream and the workspace together (Bind).
//
//   Blas blas;                                         // cublasCreate, cudaMalloc
//   TP_CUDA(cublasGemmEx(blas.Bind(stream), ...));     // on `stream`, with the workspace
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace twinpipe::execute::cuda {

class Blas {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  Blas();
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // The handle, its next calls queued on `stream` with the workspace.
  cublasHandle_t Bind(cudaStream_t stream) const;

 private:
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace twinpipe::execute::cuda
