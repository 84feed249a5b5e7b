#include "execute/layers/pooling.h"

namespace twinpipe::execute {

Tensor GlobalAvgPool::Forward(const Tensor& x, Saved& /*saved*/, Mode /*mode*/) {
  Tensor y(x.account(), x.rows(), c_);
  for (int b = 0; b < x.rows(); ++b) {
    for (int c = 0; c < c_; ++c) {
      const float* channel = x.ptr(b, c * hw_);
      double s = 0;
      for (int p = 0; p < hw_; ++p) s += channel[p];
      y.at(b, c) = static_cast<float>(s / hw_);
    }
  }
  return y;
}

Tensor GlobalAvgPool::Backward(const Tensor& dy, const Saved& /*saved*/) {
  Tensor dx(dy.account(), dy.rows(), c_ * hw_);
  for (int b = 0; b < dy.rows(); ++b) {
    for (int c = 0; c < c_; ++c) {
      const float g = dy.at(b, c) / static_cast<float>(hw_);
      float* channel = dx.ptr(b, c * hw_);
      for (int p = 0; p < hw_; ++p) channel[p] = g;
    }
  }
  return dx;
}

}  // namespace twinpipe::execute
