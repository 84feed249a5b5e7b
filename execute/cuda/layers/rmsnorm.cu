#include "execute/cuda/layers/rmsnorm.h"

#include "execute/cuda/elementwise.h"
#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

__global__ void RmsNormForward(const float* x, const float* gain, int cols, float eps, float* y, float* xhat,
                               float* rstd) {
  const long long row = blockIdx.x;
  const float* xr = x + row * cols;
  double square = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) square += static_cast<double>(xr[c]) * xr[c];
  const float rs = static_cast<float>(1.0 / sqrt(BlockSum(square) / cols + eps));
  if (threadIdx.x == 0) rstd[row] = rs;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float h = xr[c] * rs;
    xhat[row * cols + c] = h;
    y[row * cols + c] = h * gain[c];
  }
}

// dx = rstd (g - xhat mean(g xhat)), g = dy gain.
__global__ void RmsNormBackward(const float* dy, const float* xhat, const float* rstd, const float* gain, int cols,
                                float* dx) {
  const long long row = blockIdx.x;
  double sgx = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    sgx += static_cast<double>(dy[row * cols + c]) * gain[c] * xhat[row * cols + c];
  }
  const double mean_gx = BlockSum(sgx) / cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const double g = static_cast<double>(dy[row * cols + c]) * gain[c];
    dx[row * cols + c] = static_cast<float>(rstd[row] * (g - xhat[row * cols + c] * mean_gx));
  }
}

}  // namespace

RmsNorm::RmsNorm(int features, float eps, const std::vector<Param*>& init)
    : c_(features), eps_(eps), gain_(Upload(*init.at(0))) {}

DeviceTensor RmsNorm::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  const int B = x.rows();
  DeviceTensor y = ctx.Alloc(B, c_), xhat = ctx.Alloc(B, c_), rstd = ctx.Alloc(B, 1);
  if (B > 0) {
    RmsNormForward<<<B, kThreads, 0, ctx.stream>>>(x.data(), gain_.value.get(), c_, eps_, y.data(), xhat.data(),
                                                   rstd.data());
    Launched("rmsnorm forward");
  }
  if (mode != Mode::kEval) saved.t = {xhat, rstd};
  return y;
}

DeviceTensor RmsNorm::Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) {
  const DeviceTensor& xhat = saved.t.at(0);
  const int B = dy.rows();
  DeviceTensor dx = ctx.Alloc(B, c_);
  if (B > 0) {
    RmsNormBackward<<<B, kThreads, 0, ctx.stream>>>(dy.data(), xhat.data(), saved.t.at(1).data(), gain_.value.get(),
                                                    c_, dx.data());
    Launched("rmsnorm backward");
  }
  ColumnSums(ctx, dy.data(), xhat.data(), B, c_, gain_.grad.get());  // dgain += sum_r dy xhat
  return dx;
}

}  // namespace twinpipe::execute::cuda
