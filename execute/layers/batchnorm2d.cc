#include "execute/layers/batchnorm2d.h"

namespace twinpipe::execute {

BatchNorm2d::BatchNorm2d(int channels, int pixels) : c_(channels), hw_(pixels), bn_(channels) {}

Tensor BatchNorm2d::ToRows(const Tensor& images) const {
  Tensor rows(images.account(), images.rows() * hw_, c_);
  for (int b = 0; b < images.rows(); ++b) {
    for (int c = 0; c < c_; ++c) {
      const float* channel = images.ptr(b, c * hw_);
      for (int p = 0; p < hw_; ++p) rows.at(b * hw_ + p, c) = channel[p];
    }
  }
  return rows;
}

Tensor BatchNorm2d::ToImages(const Tensor& rows) const {
  const int B = rows.rows() / hw_;
  Tensor images(rows.account(), B, c_ * hw_);
  for (int b = 0; b < B; ++b) {
    for (int c = 0; c < c_; ++c) {
      float* channel = images.ptr(b, c * hw_);
      for (int p = 0; p < hw_; ++p) channel[p] = rows.at(b * hw_ + p, c);
    }
  }
  return images;
}

Tensor BatchNorm2d::Forward(const Tensor& x, Saved& saved, Mode mode) {
  return ToImages(bn_.Forward(ToRows(x), saved, mode));
}

Tensor BatchNorm2d::Backward(const Tensor& dy, const Saved& saved) {
  return ToImages(bn_.Backward(ToRows(dy), saved));
}

}  // namespace twinpipe::execute
