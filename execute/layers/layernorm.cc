#include "execute/layers/layernorm.h"

#include <cmath>

#include "execute/layers/param_init.h"

namespace twinpipe::execute {

LayerNorm::LayerNorm(int features, float eps) : c_(features), eps_(eps), gamma_(ConstantParam("gamma", features, 1.f)), beta_(ConstantParam("beta", features, 0.f)) {}

Tensor LayerNorm::Forward(const Tensor& x, Saved& saved, Mode mode) {
  const int B = x.rows();
  auto y = Tensor::Uninitialized(x.account(), B, c_), xhat = Tensor::Uninitialized(x.account(), B, c_),
       rstd = Tensor::Uninitialized(x.account(), B, 1);
  for (int r = 0; r < B; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < c_; ++c) mean += x.at(r, c);
    mean /= c_;
    for (int c = 0; c < c_; ++c) var += (x.at(r, c) - mean) * (x.at(r, c) - mean);
    var /= c_;
    const float rs = static_cast<float>(1.0 / std::sqrt(var + eps_));
    rstd.at(r, 0) = rs;
    for (int c = 0; c < c_; ++c) {
      xhat.at(r, c) = static_cast<float>((x.at(r, c) - mean) * rs);
      y.at(r, c) = xhat.at(r, c) * gamma_.value[c] + beta_.value[c];
    }
  }
  if (mode != Mode::kEval) {
    saved.t.clear();
    saved.t.push_back(std::move(xhat));
    saved.t.push_back(std::move(rstd));
  }
  return y;
}

Tensor LayerNorm::Backward(const Tensor& dy, const Saved& saved) {
  const Tensor& xhat = saved.t.at(0);
  const Tensor& rstd = saved.t.at(1);
  const int B = dy.rows();
  auto dx = Tensor::Uninitialized(dy.account(), B, c_);
  for (int r = 0; r < B; ++r) {
    double mean_g = 0, mean_gx = 0;
    for (int c = 0; c < c_; ++c) {
      const double g = dy.at(r, c) * gamma_.value[c];
      mean_g += g;
      mean_gx += g * xhat.at(r, c);
      gamma_.grad[c] += dy.at(r, c) * xhat.at(r, c);
      beta_.grad[c] += dy.at(r, c);
    }
    mean_g /= c_;
    mean_gx /= c_;
    for (int c = 0; c < c_; ++c) {
      const double g = dy.at(r, c) * gamma_.value[c];
      dx.at(r, c) = static_cast<float>(rstd.at(r, 0) * (g - mean_g - xhat.at(r, c) * mean_gx));
    }
  }
  return dx;
}

}  // namespace twinpipe::execute
