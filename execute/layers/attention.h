// Multi-head self-attention over (B*S, d) rows (S tokens per sample): a
// fused QKV projection, per head softmax(Q K^T / sqrt(d/h)) V (causal: no
// token sees a later one), and an output projection. Grouped-query
// attention: kv_heads K and V heads (dh = d/heads wide each), query head h
// reading K/V head h / (heads / kv_heads), so the projection is
// d + 2 kv_heads dh wide (columns Q | K | V). Rotary positions (rotary.h)
// turn Q and K after the projection. Saves the projections' inputs, QKV (Q
// and K turned) and the attention probabilities (B h S^2 floats).
//
//   SelfAttention a(seed, /*d=*/256, /*heads=*/4, /*seq=*/128, /*causal=*/false);
//   SelfAttention gqa(seed, {.d = 256, .heads = 8, .kv_heads = 2, .seq = 128, .causal = true, .rope = true,
//                            .bias = false});
#pragma once

#include <optional>

#include "execute/layers/attention_shape.h"
#include "execute/layers/linear.h"
#include "execute/layers/rotary.h"

namespace twinpipe::execute {

class SelfAttention : public Layer {
 public:
  SelfAttention(uint64_t seed, int d, int heads, int seq, bool causal)
      : SelfAttention(seed, AttentionShape{.d = d, .heads = heads, .seq = seq, .causal = causal}) {}
  SelfAttention(uint64_t seed, const AttentionShape& shape);
  std::string_view Name() const override { return "attention"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
  Tensor BackwardInput(const Tensor& dy, Saved& saved) override;
  void BackwardWeight(Saved& saved) override;
  std::vector<Param*> Params() override;
  const AttentionShape& shape() const { return shape_; }
  int d() const { return shape_.d; }
  int heads() const { return shape_.heads; }
  int seq() const { return shape_.seq; }
  bool causal() const { return shape_.causal; }
  const Rotary* rotary() const { return rotary_ ? &*rotary_ : nullptr; }

 private:
  // d(attention output) -> d(QKV), through the softmax, from the saved QKV
  // and probabilities; Q's and K's gradients turned back when rotary.
  Tensor CoreBackward(const Tensor& d_attn, const Tensor& qkv, const Tensor& probs) const;
  AttentionShape shape_;
  std::optional<Rotary> rotary_;
  Linear qkv_, out_;
};

}  // namespace twinpipe::execute
