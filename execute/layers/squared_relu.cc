#include "execute/layers/squared_relu.h"

namespace twinpipe::execute {

Tensor SquaredRelu::Forward(const Tensor& x, Saved& saved, Mode mode) {
  auto y = Tensor::Uninitialized(x.account(), x.rows(), x.cols());
  const size_t n = static_cast<size_t>(x.rows()) * x.cols();
  for (size_t i = 0; i < n; ++i) {
    const float r = x.data()[i] > 0 ? x.data()[i] : 0.f;
    y.data()[i] = r * r;
  }
  if (mode != Mode::kEval) {
    saved.t.clear();
    saved.t.push_back(x);
  }
  return y;
}

Tensor SquaredRelu::Backward(const Tensor& dy, const Saved& saved) {
  const Tensor& x = saved.t.at(0);
  auto dx = Tensor::Uninitialized(dy.account(), dy.rows(), dy.cols());
  const size_t n = static_cast<size_t>(dy.rows()) * dy.cols();
  for (size_t i = 0; i < n; ++i) dx.data()[i] = x.data()[i] > 0 ? 2.f * x.data()[i] * dy.data()[i] : 0.f;
  return dx;
}

}  // namespace twinpipe::execute
