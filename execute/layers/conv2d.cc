#include "execute/layers/conv2d.h"

#include <cmath>
#include <vector>

#include "execute/gemm.h"

namespace twinpipe::execute {

Conv2d::Conv2d(uint64_t seed, int in_channels, int out_channels, int image, int stride)
    : cin_(in_channels), cout_(out_channels), in_(image), out_((image - 1) / stride + 1), stride_(stride) {
  const size_t n = static_cast<size_t>(cout_) * cin_ * 9;
  weight_ = Param{"weight", InitUniform(seed * 2 + 1, n, 1.f / std::sqrt(static_cast<float>(cin_ * 9))), {}, {}, {}};
  weight_.grad.assign(n, 0.0);
  weight_.scratch.assign(n, 0.f);
}

// cols[(c * 9 + ky * 3 + kx), (oy * out + ox)] = image[c, oy s + ky - 1, ox s + kx - 1], 0 outside.
void Conv2d::Im2Col(const float* image, float* cols) const {
  const int hw = out_ * out_;
  for (int c = 0; c < cin_; ++c) {
    for (int ky = 0; ky < 3; ++ky) {
      for (int kx = 0; kx < 3; ++kx) {
        float* row = cols + static_cast<size_t>((c * 3 + ky) * 3 + kx) * hw;
        for (int oy = 0; oy < out_; ++oy) {
          const int iy = oy * stride_ + ky - 1;
          for (int ox = 0; ox < out_; ++ox) {
            const int ix = ox * stride_ + kx - 1;
            const bool inside = iy >= 0 && iy < in_ && ix >= 0 && ix < in_;
            row[oy * out_ + ox] = inside ? image[(static_cast<size_t>(c) * in_ + iy) * in_ + ix] : 0.f;
          }
        }
      }
    }
  }
}

Tensor Conv2d::Forward(const Tensor& x, Saved& saved, Mode mode) {
  const int B = x.rows(), hw = out_ * out_;
  Tensor y(x.account(), B, cout_ * hw);
  std::vector<float> cols(static_cast<size_t>(cin_) * 9 * hw);
  for (int b = 0; b < B; ++b) {
    Im2Col(x.ptr(b, 0), cols.data());
    Gemm(false, false, cout_, hw, cin_ * 9, 1.f, weight_.value.data(), cols.data(), 0.f, y.ptr(b, 0));
  }
  if (mode != Mode::kEval) {
    saved.t.clear();
    saved.t.push_back(x);
  }
  return y;
}

Tensor Conv2d::InputGradient(const Tensor& dy) const {
  const int B = dy.rows(), hw = out_ * out_;
  Tensor dx(dy.account(), B, cin_ * in_ * in_);
  std::vector<float> dcols(static_cast<size_t>(cin_) * 9 * hw);
  for (int b = 0; b < B; ++b) {
    Gemm(true, false, cin_ * 9, hw, cout_, 1.f, weight_.value.data(), dy.ptr(b, 0), 0.f, dcols.data());
    float* image = dx.ptr(b, 0);  // col2im: every column entry back where it came from
    for (int c = 0; c < cin_; ++c) {
      for (int ky = 0; ky < 3; ++ky) {
        for (int kx = 0; kx < 3; ++kx) {
          const float* row = dcols.data() + static_cast<size_t>((c * 3 + ky) * 3 + kx) * hw;
          for (int oy = 0; oy < out_; ++oy) {
            const int iy = oy * stride_ + ky - 1;
            if (iy < 0 || iy >= in_) continue;
            for (int ox = 0; ox < out_; ++ox) {
              const int ix = ox * stride_ + kx - 1;
              if (ix >= 0 && ix < in_) image[(static_cast<size_t>(c) * in_ + iy) * in_ + ix] += row[oy * out_ + ox];
            }
          }
        }
      }
    }
  }
  return dx;
}

void Conv2d::AddWeightGradients(const Tensor& dy, const Tensor& x) {
  const int B = dy.rows(), hw = out_ * out_;
  std::vector<float> cols(static_cast<size_t>(cin_) * 9 * hw);
  float* dw = weight_.scratch.data();
  for (int b = 0; b < B; ++b) {
    Im2Col(x.ptr(b, 0), cols.data());
    Gemm(false, true, cout_, cin_ * 9, hw, 1.f, dy.ptr(b, 0), cols.data(), b == 0 ? 0.f : 1.f, dw);
  }
  if (B == 0) return;
  for (size_t i = 0; i < weight_.grad.size(); ++i) weight_.grad[i] += dw[i];
}

}  // namespace twinpipe::execute
