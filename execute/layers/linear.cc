#include "execute/layers/linear.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "execute/gemm.h"

namespace twinpipe::execute {

Linear::Linear(uint64_t seed, int in, int out, bool bias) : in_(in), out_(out), has_bias_(bias) {
  const float bound = 1.f / std::sqrt(static_cast<float>(in));
  weight_ = Param{"weight", InitUniform(seed * 2 + 1, static_cast<size_t>(in) * out, bound), {}, {}, {}};
  weight_.grad.assign(weight_.value.size(), 0.0);
  weight_.scratch.assign(weight_.value.size(), 0.f);
  if (bias) {
    bias_ = Param{"bias", InitUniform(seed * 2 + 2, out, bound), {}, {}, {}};
    bias_.grad.assign(bias_.value.size(), 0.0);
  }
}

void Linear::TieWeight(std::vector<float> value) {
  if (value.size() != weight_.value.size()) throw std::invalid_argument("linear: a tied weight of the wrong size");
  weight_.value = std::move(value);
  weight_.tie = Tie::kCopy;
}

Tensor Linear::Forward(const Tensor& x, Saved& saved, Mode mode) {
  const int B = x.rows();
  auto y = Tensor::Uninitialized(x.account(), B, out_);  // the bias, then += x W^T
  if (has_bias_) {
    for (int r = 0; r < B; ++r) {
      for (int c = 0; c < out_; ++c) y.at(r, c) = bias_.value[c];
    }
  }
  Gemm(false, true, B, out_, in_, 1.f, x.data(), weight_.value.data(), has_bias_ ? 1.f : 0.f, y.data());
  if (mode != Mode::kEval) {
    saved.t.clear();
    saved.t.push_back(x);
  }
  return y;
}

Tensor Linear::InputGradient(const Tensor& dy) const {
  auto dx = Tensor::Uninitialized(dy.account(), dy.rows(), in_);
  Gemm(false, false, dy.rows(), in_, out_, 1.f, dy.data(), weight_.value.data(), 0.f, dx.data());  // dy W
  return dx;
}

void Linear::AddWeightGradients(const Tensor& dy, const Tensor& x) {
  const int B = x.rows();
  float* dw = weight_.scratch.data();
  Gemm(true, false, out_, in_, B, 1.f, dy.data(), x.data(), 0.f, dw);  // dy^T x, then into fp64
  double* __restrict grad = weight_.grad.data();
  for (size_t i = 0; i < weight_.grad.size(); ++i) grad[i] += dw[i];
  if (!has_bias_) return;
  // Each column's sum in row order, the rows read in memory order (a float
  // per column, as before, so the sums are unchanged).
  std::vector<float> sums(out_, 0.f);
  for (int r = 0; r < B; ++r) {
    const float* __restrict row = dy.ptr(r, 0);
    float* __restrict s = sums.data();
    for (int c = 0; c < out_; ++c) s[c] += row[c];
  }
  for (int c = 0; c < out_; ++c) bias_.grad[c] += sums[c];
}

}  // namespace twinpipe::execute
