#include "execute/layers/rmsnorm.h"

#include <cmath>

#include "execute/layers/param_init.h"

namespace twinpipe::execute {

RmsNorm::RmsNorm(int features, float eps) : c_(features), eps_(eps), gain_(ConstantParam("gain", features, 1.f)) {}

Tensor RmsNorm::Forward(const Tensor& x, Saved& saved, Mode mode) {
  const int B = x.rows();
  auto y = Tensor::Uninitialized(x.account(), B, c_), xhat = Tensor::Uninitialized(x.account(), B, c_),
       rstd = Tensor::Uninitialized(x.account(), B, 1);
  for (int r = 0; r < B; ++r) {
    double square = 0;
    for (int c = 0; c < c_; ++c) square += static_cast<double>(x.at(r, c)) * x.at(r, c);
    const float rs = static_cast<float>(1.0 / std::sqrt(square / c_ + eps_));
    rstd.at(r, 0) = rs;
    for (int c = 0; c < c_; ++c) {
      xhat.at(r, c) = x.at(r, c) * rs;
      y.at(r, c) = xhat.at(r, c) * gain_.value[c];
    }
  }
  if (mode != Mode::kEval) {
    saved.t.clear();
    saved.t.push_back(std::move(xhat));
    saved.t.push_back(std::move(rstd));
  }
  return y;
}

// With g_c = dy_c gain_c: dx = rstd (g - xhat mean(g xhat)); dgain += dy xhat.
Tensor RmsNorm::Backward(const Tensor& dy, const Saved& saved) {
  const Tensor& xhat = saved.t.at(0);
  const Tensor& rstd = saved.t.at(1);
  const int B = dy.rows();
  auto dx = Tensor::Uninitialized(dy.account(), B, c_);
  for (int r = 0; r < B; ++r) {
    double mean_gx = 0;
    for (int c = 0; c < c_; ++c) {
      const double g = static_cast<double>(dy.at(r, c)) * gain_.value[c];
      mean_gx += g * xhat.at(r, c);
      gain_.grad[c] += static_cast<double>(dy.at(r, c)) * xhat.at(r, c);
    }
    mean_gx /= c_;
    for (int c = 0; c < c_; ++c) {
      const double g = static_cast<double>(dy.at(r, c)) * gain_.value[c];
      dx.at(r, c) = static_cast<float>(rstd.at(r, 0) * (g - xhat.at(r, c) * mean_gx));
    }
  }
  return dx;
}

}  // namespace twinpipe::execute
