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

__global__ void SquaredReluForward(const float* x, float* y, long long n) {
  TP_GRID_STRIDE(i, n) {
    const float r = x[i] > 0 ? x[i] : 0.f;
    y[i] = r * r;
  }
}
__global__ void SquaredReluBackward(const float* x, const float* dy, float* dx, long long n) {
  TP_GRID_STRIDE(i, n) dx[i] = x[i] > 0 ? 2.f * x[i] * dy[i] : 0.f;
}
// Over the (rows, f) output: gate x[r, c], up x[r, f + c].
__global__ void SwigluForward(const float* x, int f, float* y, long long n) {
  TP_GRID_STRIDE(i, n) {
    const long long r = i / f, c = i % f;
    const float gate = x[r * 2 * f + c], up = x[r * 2 * f + f + c];
    y[i] = gate / (1.f + expf(-gate)) * up;
  }
}
__global__ void SwigluBackward(const float* x, const float* dy, int f, float* dx, long long n) {
  TP_GRID_STRIDE(i, n) {
    const long long r = i / f, c = i % f;
    const float gate = x[r * 2 * f + c], up = x[r * 2 * f + f + c];
    const float s = 1.f / (1.f + expf(-gate));
    dx[r * 2 * f + c] = dy[i] * up * s * (1.f + gate * (1.f - s));
    dx[r * 2 * f + f + c] = dy[i] * gate * s;
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

DeviceTensor SquaredRelu::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  DeviceTensor y = ctx.Alloc(x.rows(), x.cols());
  SquaredReluForward<<<Blocks(x.size()), kThreads, 0, ctx.stream>>>(x.data(), y.data(), x.size());
  Launched("squared relu forward");
  if (mode != Mode::kEval) saved.t = {x};
  return y;
}

DeviceTensor SquaredRelu::Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) {
  DeviceTensor dx = ctx.Alloc(dy.rows(), dy.cols());
  SquaredReluBackward<<<Blocks(dy.size()), kThreads, 0, ctx.stream>>>(saved.t.at(0).data(), dy.data(), dx.data(),
                                                                      dy.size());
  Launched("squared relu backward");
  return dx;
}

DeviceTensor Swiglu::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  if (x.cols() % 2 != 0) throw CudaError("swiglu: an input of odd width (expected gate and up)");
  const int f = x.cols() / 2;
  DeviceTensor y = ctx.Alloc(x.rows(), f);
  SwigluForward<<<Blocks(y.size()), kThreads, 0, ctx.stream>>>(x.data(), f, y.data(), y.size());
  Launched("swiglu forward");
  if (mode != Mode::kEval) saved.t = {x};
  return y;
}

DeviceTensor Swiglu::Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) {
  DeviceTensor dx = ctx.Alloc(dy.rows(), 2 * dy.cols());
  SwigluBackward<<<Blocks(dy.size()), kThreads, 0, ctx.stream>>>(saved.t.at(0).data(), dy.data(), dy.cols(),
                                                                 dx.data(), dy.size());
  Launched("swiglu backward");
  return dx;
}

}  // namespace twinpipe::execute::cuda
