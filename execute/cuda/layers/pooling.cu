#include "execute/cuda/layers/pooling.h"

#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

__global__ void PoolForward(const float* x, int hw, float* y, long long n) {
  TP_GRID_STRIDE(i, n) {  // i = (b, c): the mean of that channel's pixels
    double s = 0;
    for (int p = 0; p < hw; ++p) s += x[i * hw + p];
    y[i] = static_cast<float>(s / hw);
  }
}

__global__ void PoolBackward(const float* dy, int hw, float* dx, long long n) {
  TP_GRID_STRIDE(i, n) dx[i] = dy[i / hw] / static_cast<float>(hw);
}

}  // namespace

DeviceTensor GlobalAvgPool::Forward(const Context& ctx, const DeviceTensor& x, Saved& /*saved*/, Mode /*mode*/) {
  DeviceTensor y = ctx.Alloc(x.rows(), c_);
  PoolForward<<<Blocks(y.size()), kThreads, 0, ctx.stream>>>(x.data(), hw_, y.data(), y.size());
  Launched("global average pool forward");
  return y;
}

DeviceTensor GlobalAvgPool::Backward(const Context& ctx, const DeviceTensor& dy, const Saved& /*saved*/) {
  DeviceTensor dx = ctx.Alloc(dy.rows(), c_ * hw_);
  PoolBackward<<<Blocks(dx.size()), kThreads, 0, ctx.stream>>>(dy.data(), hw_, dx.data(), dx.size());
  Launched("global average pool backward");
  return dx;
}

}  // namespace twinpipe::execute::cuda
