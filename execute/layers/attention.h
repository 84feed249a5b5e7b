// Multi-head self-attention over (B*S, d) rows (S tokens per sample): a
// fused QKV projection, per head softmax(Q K^T / sqrt(d/h)) V (causal: no
// token sees a later one), and an output projection. Saves the projections'
// inputs, QKV and the attention probabilities (B h S^2 floats).
//
//   SelfAttention a(seed, /*d=*/256, /*heads=*/4, /*seq=*/128, /*causal=*/false);
#pragma once

#include "execute/layers/linear.h"

namespace twinpipe::execute {

class SelfAttention : public Layer {
 public:
  SelfAttention(uint64_t seed, int d, int heads, int seq, bool causal);
  std::string_view Name() const override { return "attention"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
  Tensor BackwardInput(const Tensor& dy, Saved& saved) override;
  void BackwardWeight(Saved& saved) override;
  std::vector<Param*> Params() override;
  int d() const { return d_; }
  int heads() const { return heads_; }
  int seq() const { return seq_; }
  bool causal() const { return causal_; }

 private:
  // d(attention output) -> d(QKV), through the softmax, from the saved QKV and probabilities.
  Tensor CoreBackward(const Tensor& d_attn, const Tensor& qkv, const Tensor& probs) const;
  int d_, heads_, seq_;
  bool causal_;
  Linear qkv_, out_;
};

}  // namespace twinpipe::execute
