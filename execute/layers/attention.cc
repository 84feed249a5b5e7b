#include "execute/layers/attention.h"

#include <cmath>
#include <limits>

#include "execute/gemm.h"

namespace twinpipe::execute {

SelfAttention::SelfAttention(uint64_t seed, const AttentionShape& shape)
    : shape_(shape),
      qkv_(seed * 4 + 1, shape.d, shape.d + 2 * shape.kv() * shape.head_dim(), shape.bias),
      out_(seed * 4 + 2, shape.d, shape.d, shape.bias) {
  if (shape.rope) rotary_.emplace(shape.seq, shape.head_dim());
}

std::vector<Param*> SelfAttention::Params() {
  std::vector<Param*> all = qkv_.Params();
  for (Param* p : out_.Params()) all.push_back(p);
  return all;
}

Tensor SelfAttention::Forward(const Tensor& x, Saved& saved, Mode mode) {
  const int S = shape_.seq, B = x.rows() / S, H = shape_.heads, dh = shape_.head_dim(), d = shape_.d;
  const int kv = shape_.kv() * dh, ld = d + 2 * kv, group = H / shape_.kv();
  const float scale = 1.f / std::sqrt(static_cast<float>(dh));
  saved.inner.resize(2);
  Tensor qkv = qkv_.Forward(x, saved.inner[0], mode);
  if (rotary_) {
    rotary_->Apply(qkv, 0, H, false);              // Q
    rotary_->Apply(qkv, d, shape_.kv(), false);    // K
  }
  Tensor probs(x.account(), B * H * S, S), attn(x.account(), B * S, d);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      const float* q = qkv.ptr(b * S, h * dh);
      const float* k = qkv.ptr(b * S, d + h / group * dh);
      const float* v = qkv.ptr(b * S, d + kv + h / group * dh);
      float* p = probs.ptr((b * H + h) * S, 0);
      Gemm(false, true, S, S, dh, scale, q, ld, k, ld, 0.f, p, S);
      for (int i = 0; i < S; ++i) {  // softmax of row i over the tokens it may see
        float* row = p + static_cast<size_t>(i) * S;
        const int seen = shape_.causal ? i + 1 : S;
        float top = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < seen; ++j) top = std::max(top, row[j]);
        double z = 0;
        for (int j = 0; j < seen; ++j) z += (row[j] = std::exp(row[j] - top));
        for (int j = 0; j < seen; ++j) row[j] = static_cast<float>(row[j] / z);
        for (int j = seen; j < S; ++j) row[j] = 0.f;
      }
      Gemm(false, false, S, dh, S, 1.f, p, S, v, ld, 0.f, attn.ptr(b * S, h * dh), d);
    }
  }
  Tensor y = out_.Forward(attn, saved.inner[1], mode);
  saved.t.clear();
  if (mode != Mode::kEval) {
    saved.t.push_back(std::move(qkv));
    saved.t.push_back(std::move(probs));
  } else {
    saved.inner.clear();
  }
  return y;
}

Tensor SelfAttention::CoreBackward(const Tensor& d_attn, const Tensor& qkv, const Tensor& probs) const {
  const int S = shape_.seq, B = qkv.rows() / S, H = shape_.heads, dh = shape_.head_dim(), d = shape_.d;
  const int kv = shape_.kv() * dh, ld = d + 2 * kv, group = H / shape_.kv();
  const float scale = 1.f / std::sqrt(static_cast<float>(dh));
  Tensor dqkv(d_attn.account(), B * S, ld), dp(d_attn.account(), S, S);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      const float* q = qkv.ptr(b * S, h * dh);
      const float* k = qkv.ptr(b * S, d + h / group * dh);
      const float* v = qkv.ptr(b * S, d + kv + h / group * dh);
      const float* p = probs.ptr((b * H + h) * S, 0);
      const float* dout = d_attn.ptr(b * S, h * dh);
      // A K/V head's gradients sum over the query heads of its group, in head order.
      const float first = h % group == 0 ? 0.f : 1.f;
      float* dv = dqkv.ptr(b * S, d + kv + h / group * dh);
      Gemm(false, true, S, S, dh, 1.f, dout, d, v, ld, 0.f, dp.data(), S);  // dP = dO V^T
      Gemm(true, false, S, dh, S, 1.f, p, S, dout, d, first, dv, ld);        // dV += P^T dO
      for (int i = 0; i < S; ++i) {  // dScores = P (dP - sum_j P dP), masked entries have P = 0
        float* g = dp.data() + static_cast<size_t>(i) * S;
        const float* pr = p + static_cast<size_t>(i) * S;
        double dot = 0;
        for (int j = 0; j < S; ++j) dot += static_cast<double>(pr[j]) * g[j];
        for (int j = 0; j < S; ++j) g[j] = static_cast<float>(pr[j] * (g[j] - dot));
      }
      Gemm(false, false, S, dh, S, scale, dp.data(), S, k, ld, 0.f, dqkv.ptr(b * S, h * dh), ld);                // dQ
      Gemm(true, false, S, dh, S, scale, dp.data(), S, q, ld, first, dqkv.ptr(b * S, d + h / group * dh), ld);  // dK +=
    }
  }
  if (rotary_) {  // the gradients of the unturned Q and K
    rotary_->Apply(dqkv, 0, H, true);
    rotary_->Apply(dqkv, d, shape_.kv(), true);
  }
  return dqkv;
}

Tensor SelfAttention::Backward(const Tensor& dy, const Saved& saved) {
  Tensor d_attn = out_.Backward(dy, saved.inner[1]);
  return qkv_.Backward(CoreBackward(d_attn, saved.t.at(0), saved.t.at(1)), saved.inner[0]);
}

Tensor SelfAttention::BackwardInput(const Tensor& dy, Saved& saved) {
  Tensor d_attn = out_.BackwardInput(dy, saved.inner[1]);
  Tensor dqkv = CoreBackward(d_attn, saved.t.at(0), saved.t.at(1));
  saved.t.clear();  // W needs only the projections' own saved tensors
  return qkv_.BackwardInput(dqkv, saved.inner[0]);
}

void SelfAttention::BackwardWeight(Saved& saved) {
  out_.BackwardWeight(saved.inner[1]);
  qkv_.BackwardWeight(saved.inner[0]);
}

}  // namespace twinpipe::execute
