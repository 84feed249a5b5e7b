#include "execute/cuda/blas.h"

#include "execute/cuda/check.h"

namespace twinpipe::execute::cuda {

Blas::Blas() {
  TP_CUDA(cublasCreate(&handle_));
  const cudaError_t allocated = cudaMalloc(&workspace_, kWorkspaceBytes);
  if (allocated != cudaSuccess) {
    static_cast<void>(cublasDestroy(handle_));
    TP_CUDA(allocated);
  }
}

Blas::~Blas() {
  // cublasDestroy waits for the device, so no queued call still uses the
  // workspace. A destructor cannot fail the run.
  static_cast<void>(cublasDestroy(handle_));
  static_cast<void>(cudaFree(workspace_));
}

cublasHandle_t Blas::Bind(cudaStream_t stream) const {
  TP_CUDA(cublasSetStream(handle_, stream));
  TP_CUDA(cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes));
  return handle_;
}

}  // namespace twinpipe::execute::cuda
