#include "execute/layers/relu.h"

namespace twinpipe::execute {

Tensor Relu::Forward(const Tensor& x, Saved& saved, Mode mode) {
  auto y = Tensor::Uninitialized(x.account(), x.rows(), x.cols());
  const size_t n = static_cast<size_t>(x.rows()) * x.cols();
  for (size_t i = 0; i < n; ++i) y.data()[i] = x.data()[i] > 0 ? x.data()[i] : 0.f;
  if (mode != Mode::kEval) {
    saved.t.clear();
    saved.t.push_back(y);
  }
  return y;
}

Tensor Relu::Backward(const Tensor& dy, const Saved& saved) {
  const Tensor& y = saved.t.at(0);
  auto dx = Tensor::Uninitialized(dy.account(), dy.rows(), dy.cols());
  const size_t n = static_cast<size_t>(dy.rows()) * dy.cols();
  for (size_t i = 0; i < n; ++i) dx.data()[i] = y.data()[i] > 0 ? dy.data()[i] : 0.f;
  return dx;
}

}  // namespace twinpipe::execute
