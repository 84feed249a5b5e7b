#include "execute/cuda/check.h"

#include <fmt/format.h>

namespace twinpipe::execute::cuda {

void Check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  throw CudaError(fmt::format("{}: CUDA error {} ({})", what, cudaGetErrorName(status), cudaGetErrorString(status)));
}

void Check(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(fmt::format("{}: cuBLAS error {} ({})", what, cublasGetStatusName(status),
                              cublasGetStatusString(status)));
}

void Check(ncclResult_t status, const char* what) {
  if (status == ncclSuccess) return;
  throw CudaError(fmt::format("{}: NCCL error {} ({})", what, static_cast<int>(status), ncclGetErrorString(status)));
}

}  // namespace twinpipe::execute::cuda
