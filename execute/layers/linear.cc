#include "execute/layers/linear.h"

#include <cmath>

#include "execute/gemm.h"

namespace twinpipe::execute {

Linear::Linear(uint64_t seed, int in, int out) : in_(in), out_(out) {
  const float bound = 1.f / std::sqrt(static_cast<float>(in));
  weight_ = Param{"weight", InitUniform(seed * 2 + 1, static_cast<size_t>(in) * out, bound), {}, {}, {}};
  bias_ = Param{"bias", InitUniform(seed * 2 + 2, out, bound), {}, {}, {}};
  weight_.grad.assign(weight_.value.size(), 0.0);
  weight_.scratch.assign(weight_.value.size(), 0.f);
  bias_.grad.assign(bias_.value.size(), 0.0);
}

Tensor Linear::Forward(const Tensor& x, Saved& saved, Mode mode) {
  const int B = x.rows();
  Tensor y(x.account(), B, out_);
  for (int r = 0; r < B; ++r) {
    for (int c = 0; c < out_; ++c) y.at(r, c) = bias_.value[c];
  }
  Gemm(false, true, B, out_, in_, 1.f, x.data(), weight_.value.data(), 1.f, y.data());
  if (mode != Mode::kEval) {
    saved.t.clear();
    saved.t.push_back(x);
  }
  return y;
}

Tensor Linear::InputGradient(const Tensor& dy) const {
  Tensor dx(dy.account(), dy.rows(), in_);
  Gemm(false, false, dy.rows(), in_, out_, 1.f, dy.data(), weight_.value.data(), 0.f, dx.data());  // dy W
  return dx;
}

void Linear::AddWeightGradients(const Tensor& dy, const Tensor& x) {
  const int B = x.rows();
  float* dw = weight_.scratch.data();
  Gemm(true, false, out_, in_, B, 1.f, dy.data(), x.data(), 0.f, dw);  // dy^T x, then into fp64
  for (size_t i = 0; i < weight_.grad.size(); ++i) weight_.grad[i] += dw[i];
  for (int c = 0; c < out_; ++c) {
    float s = 0;
    for (int r = 0; r < B; ++r) s += dy.at(r, c);
    bias_.grad[c] += s;
  }
}

}  // namespace twinpipe::execute
