#include "execute/layers/gelu.h"

#include <cmath>

namespace twinpipe::execute {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

Tensor Gelu::Forward(const Tensor& x, Saved& saved, Mode mode) {
  Tensor y(x.account(), x.rows(), x.cols());
  const size_t n = static_cast<size_t>(x.rows()) * x.cols();
  for (size_t i = 0; i < n; ++i) {
    const float v = x.data()[i];
    y.data()[i] = 0.5f * v * (1.f + std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v)));
  }
  if (mode != Mode::kEval) {
    saved.t.clear();
    saved.t.push_back(x);
  }
  return y;
}

Tensor Gelu::Backward(const Tensor& dy, const Saved& saved) {
  const Tensor& x = saved.t.at(0);
  Tensor dx(dy.account(), dy.rows(), dy.cols());
  const size_t n = static_cast<size_t>(dy.rows()) * dy.cols();
  for (size_t i = 0; i < n; ++i) {
    const float v = x.data()[i];
    const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
    const float t = std::tanh(u);
    const float du = kSqrt2OverPi * (1.f + 3.f * kCubic * v * v);
    dx.data()[i] = dy.data()[i] * (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du);
  }
  return dx;
}

}  // namespace twinpipe::execute
