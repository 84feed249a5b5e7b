#include "execute/layers/batchnorm.h"

#include <algorithm>
#include <cmath>

#include "execute/layers/param_init.h"

namespace twinpipe::execute {

BatchNorm::BatchNorm(int features, float momentum, float eps)
    : c_(features), momentum_(momentum), eps_(eps), gamma_(ConstantParam("gamma", features, 1.f)), beta_(ConstantParam("beta", features, 0.f)),
      running_mean_(features, 0.0), running_var_(features, 1.0), step_sum_(features, 0.0), step_sum_sq_(features, 0.0) {}

Tensor BatchNorm::Forward(const Tensor& x, Saved& saved, Mode mode) {
  const int B = x.rows();
  Tensor y(x.account(), B, c_);
  if (mode == Mode::kEval) {
    for (int c = 0; c < c_; ++c) {
      const double rs = 1.0 / std::sqrt(running_var_[c] + eps_);
      for (int r = 0; r < B; ++r) {
        y.at(r, c) = static_cast<float>((x.at(r, c) - running_mean_[c]) * rs * gamma_.value[c] + beta_.value[c]);
      }
    }
    return y;
  }
  Tensor xhat(x.account(), B, c_), rstd(x.account(), 1, c_);
  for (int c = 0; c < c_; ++c) {
    double sum = 0, sum_sq = 0;
    for (int r = 0; r < B; ++r) {
      sum += x.at(r, c);
      sum_sq += static_cast<double>(x.at(r, c)) * x.at(r, c);
    }
    const double mean = sum / B;
    const double var = std::max(0.0, sum_sq / B - mean * mean);
    if (mode == Mode::kTrain) {  // a recompute must not count the rows twice
      step_sum_[c] += sum;
      step_sum_sq_[c] += sum_sq;
    }
    const float rs = static_cast<float>(1.0 / std::sqrt(var + eps_));
    rstd.at(0, c) = rs;
    for (int r = 0; r < B; ++r) {
      xhat.at(r, c) = static_cast<float>((x.at(r, c) - mean) * rs);
      y.at(r, c) = xhat.at(r, c) * gamma_.value[c] + beta_.value[c];
    }
  }
  if (mode == Mode::kTrain) step_rows_ += B;
  saved.t.clear();
  saved.t.push_back(std::move(xhat));
  saved.t.push_back(std::move(rstd));
  return y;
}

Tensor BatchNorm::Backward(const Tensor& dy, const Saved& saved) {
  const Tensor& xhat = saved.t.at(0);
  const Tensor& rstd = saved.t.at(1);
  const int B = dy.rows();
  Tensor dx(dy.account(), B, c_);
  for (int c = 0; c < c_; ++c) {
    double sum_g = 0, sum_gx = 0;
    for (int r = 0; r < B; ++r) {
      const double g = dy.at(r, c) * gamma_.value[c];
      sum_g += g;
      sum_gx += g * xhat.at(r, c);
      gamma_.grad[c] += dy.at(r, c) * xhat.at(r, c);
      beta_.grad[c] += dy.at(r, c);
    }
    for (int r = 0; r < B; ++r) {
      const double g = dy.at(r, c) * gamma_.value[c];
      dx.at(r, c) = static_cast<float>(rstd.at(0, c) * (g - sum_g / B - xhat.at(r, c) * sum_gx / B));
    }
  }
  return dx;
}

void BatchNorm::EndStep() {
  if (step_rows_ == 0) return;
  const double n = static_cast<double>(step_rows_);
  for (int c = 0; c < c_; ++c) {
    const double mean = step_sum_[c] / n;
    const double var = std::max(0.0, step_sum_sq_[c] / n - mean * mean);
    const double unbiased = n > 1 ? var * n / (n - 1) : var;
    running_mean_[c] = (1 - momentum_) * running_mean_[c] + momentum_ * mean;
    running_var_[c] = (1 - momentum_) * running_var_[c] + momentum_ * unbiased;
    step_sum_[c] = step_sum_sq_[c] = 0;
  }
  step_rows_ = 0;
}

}  // namespace twinpipe::execute
