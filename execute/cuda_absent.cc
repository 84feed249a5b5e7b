// The CUDA backend's entry points in a twinpipe built without CUDA (nvcc,
// cuBLAS or NCCL not found, or a sanitizer build).
#include "execute/runtime.h"

namespace twinpipe::execute {

Result<ExecuteResult> ExecuteCuda(const cost::Config&, const cost::Plan&, const ExecuteOptions&) {
  return FailRuntime("this twinpipe was built without the CUDA backend (nvcc, cuBLAS or NCCL were not found when "
                     "it was configured, or it is a sanitizer build); run with --backend cpu");
}

}  // namespace twinpipe::execute
