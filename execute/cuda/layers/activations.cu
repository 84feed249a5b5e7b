#include "execute/cuda/layers/activations.h"

#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__global__ void ReluForward(const float* x, float* y, long long n) {
  TP_GRID_STRIDE(i, n) y[i] = x[i] > 0 ? x[i] : 0.f;
}
__global__ void ReluBackward(const float* y, const float* dy, float* dx, long long n) {
  TP_GRID_STRIDE(i, n) dx[i] = y[i] > 0 ? dy[i] : 0.f;
}
__global__ void GeluForward(const float* x, float* y, long long n) {
  TP_GRID_STRIDE(i, n) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + tanhf(kSqrt2OverPi * (v + kCubic * v * v * v)));
  }
}
__global__ void GeluBackward(const float* x, const float* dy, float* dx, long long n) {
  TP_GRID_STRIDE(i, n) {
    const float v = x[i];
    const float t = tanhf(kSqrt2OverPi * (v + kCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.f + 3.f * kCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du);
  }
}

}  // namespace

DeviceTensor Relu::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  DeviceTensor y = ctx.Alloc(x.rows(), x.cols());
  ReluForward<<<Blocks(x.size()), kThreads, 0, ctx.stream>>>(x.data(), y.data(), x.size());
  Launched("relu forward");
  if (mode != Mode::kEval) saved.t = {y};
  return y;
}

DeviceTensor Relu::Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) {
  DeviceTensor dx = ctx.Alloc(dy.rows(), dy.cols());
  ReluBackward<<<Blocks(dy.size()), kThreads, 0, ctx.stream>>>(saved.t.at(0).data(), dy.data(), dx.data(), dy.size());
  Launched("relu backward");
  return dx;
}

DeviceTensor Gelu::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  DeviceTensor y = ctx.Alloc(x.rows(), x.cols());
  GeluForward<<<Blocks(x.size()), kThreads, 0, ctx.stream>>>(x.data(), y.data(), x.size());
  Launched("gelu forward");
  if (mode != Mode::kEval) saved.t = {x};
  return y;
}

DeviceTensor Gelu::Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) {
  DeviceTensor dx = ctx.Alloc(dy.rows(), dy.cols());
  GeluBackward<<<Blocks(dy.size()), kThreads, 0, ctx.stream>>>(saved.t.at(0).data(), dy.data(), dx.data(), dy.size());
  Launched("gelu backward");
  return dx;
}

}  // namespace twinpipe::execute::cuda
