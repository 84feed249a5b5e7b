#include "execute/cuda/layers/layernorm.h"

#include "execute/cuda/elementwise.h"
#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

__global__ void LayerNormForward(const float* x, const float* gamma, const float* beta, int cols, float eps, float* y,
                                 float* xhat, float* rstd) {
  const long long row = blockIdx.x;
  const float* xr = x + row * cols;
  double s = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
  const double mean = BlockSum(s) / cols;
  double v = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) v += (xr[c] - mean) * (xr[c] - mean);
  const float rs = static_cast<float>(1.0 / sqrt(BlockSum(v) / cols + eps));
  if (threadIdx.x == 0) rstd[row] = rs;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float h = static_cast<float>((xr[c] - mean) * rs);
    xhat[row * cols + c] = h;
    y[row * cols + c] = h * gamma[c] + beta[c];
  }
}

__global__ void LayerNormBackward(const float* dy, const float* xhat, const float* rstd, const float* gamma, int cols,
                                  float* dx) {
  const long long row = blockIdx.x;
  double sg = 0, sgx = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const double g = static_cast<double>(dy[row * cols + c]) * gamma[c];
    sg += g;
    sgx += g * xhat[row * cols + c];
  }
  const double mean_g = BlockSum(sg) / cols, mean_gx = BlockSum(sgx) / cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const double g = static_cast<double>(dy[row * cols + c]) * gamma[c];
    dx[row * cols + c] = static_cast<float>(rstd[row] * (g - mean_g - xhat[row * cols + c] * mean_gx));
  }
}

}  // namespace

LayerNorm::LayerNorm(int features, float eps, const std::vector<Param*>& init)
    : c_(features), eps_(eps), gamma_(Upload(*init.at(0))), beta_(Upload(*init.at(1))) {}

DeviceTensor LayerNorm::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  const int B = x.rows();
  DeviceTensor y = ctx.Alloc(B, c_), xhat = ctx.Alloc(B, c_), rstd = ctx.Alloc(B, 1);
  if (B > 0) {
    LayerNormForward<<<B, kThreads, 0, ctx.stream>>>(x.data(), gamma_.value.get(), beta_.value.get(), c_, eps_,
                                                     y.data(), xhat.data(), rstd.data());
    Launched("layernorm forward");
  }
  if (mode != Mode::kEval) saved.t = {xhat, rstd};
  return y;
}

DeviceTensor LayerNorm::Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) {
  const DeviceTensor& xhat = saved.t.at(0);
  const int B = dy.rows();
  DeviceTensor dx = ctx.Alloc(B, c_);
  if (B > 0) {
    LayerNormBackward<<<B, kThreads, 0, ctx.stream>>>(dy.data(), xhat.data(), saved.t.at(1).data(), gamma_.value.get(),
                                                      c_, dx.data());
    Launched("layernorm backward");
  }
  ColumnSums(ctx, dy.data(), xhat.data(), B, c_, gamma_.grad.get());  // dgamma += sum_r dy xhat
  ColumnSums(ctx, dy.data(), nullptr, B, c_, beta_.grad.get());       // dbeta += sum_r dy
  return dx;
}

}  // namespace twinpipe::execute::cuda
