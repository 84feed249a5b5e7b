#include "execute/cuda/layers/softmax_cross_entropy.h"

#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

// A block per row; the row's loss is added by thread 0 (atomically: rows of
// one micro-batch run in parallel).
__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int* labels, int cols, double normaliser,
                                          float* grad, double* loss_sum) {
  const long long row = blockIdx.x;
  const float* z = logits + row * cols;
  double top = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) top = fmax(top, static_cast<double>(z[c]));
  top = BlockMax(top);
  double s = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += exp(z[c] - top);
  const double log_z = log(BlockSum(s)) + top;
  const int label = labels[row];
  if (threadIdx.x == 0) atomicAdd(loss_sum, log_z - z[label]);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const double p = exp(z[c] - log_z);
    grad[row * cols + c] = static_cast<float>((p - (c == label ? 1.0 : 0.0)) / normaliser);
  }
}

}  // namespace

DeviceTensor SoftmaxCrossEntropy(const Context& ctx, const DeviceTensor& logits, const int* labels, double normaliser,
                                 double* loss_sum) {
  DeviceTensor grad = ctx.Alloc(logits.rows(), logits.cols());
  if (logits.rows() > 0) {
    SoftmaxCrossEntropyKernel<<<logits.rows(), kThreads, 0, ctx.stream>>>(logits.data(), labels, logits.cols(),
                                                                          normaliser, grad.data(), loss_sum);
    Launched("softmax cross-entropy");
  }
  return grad;
}

}  // namespace twinpipe::execute::cuda
