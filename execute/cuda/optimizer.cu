#include "execute/cuda/optimizer.h"

#include <cmath>

#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

__global__ void Sgd(float* w, float* g, float* m, long long n, double lr, double momentum) {
  TP_GRID_STRIDE(i, n) {
    m[i] = static_cast<float>(momentum * m[i] + g[i]);
    w[i] = static_cast<float>(w[i] - lr * m[i]);
    g[i] = 0;
  }
}

__global__ void Adam(float* w, float* g, float* m, float* v, long long n, double lr, double correct1, double correct2) {
  constexpr double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  TP_GRID_STRIDE(i, n) {
    const double gi = g[i];
    const double mi = b1 * m[i] + (1 - b1) * gi, vi = b2 * v[i] + (1 - b2) * gi * gi;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    w[i] = static_cast<float>(w[i] - lr * (mi * correct1) / (sqrt(vi * correct2) + eps));
    g[i] = 0;
  }
}

}  // namespace

void Apply(const Context& ctx, OptimizerKind kind, double lr, double momentum, int step, DeviceParam& p) {
  const long long n = p.value.size();
  ++p.version;  // the value's copies (its bf16 one) are stale from here on
  if (kind == OptimizerKind::kAdam) {
    const double correct1 = 1 / (1 - std::pow(0.9, step)), correct2 = 1 / (1 - std::pow(0.999, step));
    Adam<<<Blocks(n), kThreads, 0, ctx.stream>>>(p.value.get(), p.grad.get(), p.m.get(), p.v.get(), n, lr, correct1,
                                                  correct2);
    Launched("adam update");
  } else {
    Sgd<<<Blocks(n), kThreads, 0, ctx.stream>>>(p.value.get(), p.grad.get(), p.m.get(), n, lr, momentum);
    Launched("sgd update");
  }
}

}  // namespace twinpipe::execute::cuda
