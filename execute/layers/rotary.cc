#include "execute/layers/rotary.h"

#include <cmath>
#include <stdexcept>

namespace twinpipe::execute {

Rotary::Rotary(int seq, int head_dim, double theta) : seq_(seq), dh_(head_dim) {
  if (head_dim % 2 != 0) throw std::invalid_argument("rotary: an odd head width");
  const int half = head_dim / 2;
  cos_.resize(static_cast<size_t>(seq) * half);
  sin_.resize(cos_.size());
  for (int pos = 0; pos < seq; ++pos) {
    for (int i = 0; i < half; ++i) {
      const double angle = pos * std::pow(theta, -2.0 * i / head_dim);
      cos_[static_cast<size_t>(pos) * half + i] = static_cast<float>(std::cos(angle));
      sin_[static_cast<size_t>(pos) * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void Rotary::Apply(Tensor& x, int first, int heads, bool inverse) const {
  const int half = dh_ / 2;
  for (int r = 0; r < x.rows(); ++r) {
    const float* c = &cos_[static_cast<size_t>(r % seq_) * half];
    const float* s0 = &sin_[static_cast<size_t>(r % seq_) * half];
    for (int h = 0; h < heads; ++h) {
      float* a = x.ptr(r, first + h * dh_);
      float* b = a + half;
      for (int i = 0; i < half; ++i) {
        const float s = inverse ? -s0[i] : s0[i];
        const float ai = a[i], bi = b[i];
        a[i] = ai * c[i] - bi * s;
        b[i] = bi * c[i] + ai * s;
      }
    }
  }
}

}  // namespace twinpipe::execute
