#include "execute/layers/swiglu.h"

#include <cmath>
#include <stdexcept>

namespace twinpipe::execute {

Tensor Swiglu::Forward(const Tensor& x, Saved& saved, Mode mode) {
  if (x.cols() % 2 != 0) throw std::invalid_argument("swiglu: an input of odd width (expected gate and up)");
  const int B = x.rows(), f = x.cols() / 2;
  auto y = Tensor::Uninitialized(x.account(), B, f);
  for (int r = 0; r < B; ++r) {
    const float* gate = x.ptr(r, 0);
    const float* up = x.ptr(r, f);
    float* out = y.ptr(r, 0);
    for (int c = 0; c < f; ++c) out[c] = gate[c] / (1.f + std::exp(-gate[c])) * up[c];
  }
  if (mode != Mode::kEval) {
    saved.t.clear();
    saved.t.push_back(x);
  }
  return y;
}

// With s = sigmoid(gate): d gate = dy up s (1 + gate (1 - s)); d up = dy gate s.
Tensor Swiglu::Backward(const Tensor& dy, const Saved& saved) {
  const Tensor& x = saved.t.at(0);
  const int B = dy.rows(), f = dy.cols();
  auto dx = Tensor::Uninitialized(dy.account(), B, 2 * f);
  for (int r = 0; r < B; ++r) {
    const float* gate = x.ptr(r, 0);
    const float* up = x.ptr(r, f);
    const float* g = dy.ptr(r, 0);
    float* d_gate = dx.ptr(r, 0);
    float* d_up = dx.ptr(r, f);
    for (int c = 0; c < f; ++c) {
      const float s = 1.f / (1.f + std::exp(-gate[c]));
      d_gate[c] = g[c] * up[c] * s * (1.f + gate[c] * (1.f - s));
      d_up[c] = g[c] * gate[c] * s;
    }
  }
  return dx;
}

}  // namespace twinpipe::execute
