// Multi-head self-attention on the GPU, the CPU layer's arithmetic: a fused
// QKV projection (d + 2 kv_heads dh wide: Q | K | V), rotary positions on Q
// and K when the CPU twin has them (its cos and sin tables), per (sample,
// head) softmax(Q K^T / sqrt(d/h)) V with an optional causal mask (strided
// cuBLAS GEMMs, a softmax kernel per row), and an output projection. Grouped
// query heads: query head h reads K/V head h / group; the batched products
// run over the K/V heads, once per member of a group, and a K/V head's
// gradients add up its group's in head order, as on the CPU. Saves QKV (Q and
// K turned) and the probabilities.
#pragma once

#include <memory>

#include "execute/cuda/layers/linear.h"
#include "execute/layers/attention_shape.h"
#include "execute/layers/rotary.h"

namespace twinpipe::execute::cuda {

class SelfAttention : public Layer {
 public:
  // init: the QKV projection's weight (and bias), then the output
  // projection's; rotary: the CPU twin's tables, or null.
  SelfAttention(const AttentionShape& shape, const Rotary* rotary, const std::vector<Param*>& init);
  std::string_view Name() const override { return "attention"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;
  DeviceTensor BackwardInput(const Context& ctx, const DeviceTensor& dy, Saved& saved) override;
  void BackwardWeight(const Context& ctx, Saved& saved) override;
  std::vector<DeviceParam*> Params() override;

 private:
  DeviceTensor CoreBackward(const Context& ctx, const DeviceTensor& d_attn, const DeviceTensor& qkv,
                            const DeviceTensor& probs) const;
  // Turns Q's and K's heads of every row of t (in place, t freshly written).
  void Rotate(const Context& ctx, DeviceTensor& t, bool inverse) const;
  AttentionShape shape_;
  bool rope_;
  DeviceBuffer cos_, sin_;  // (seq, dh / 2) each, when rope_
  Linear qkv_, out_;
};

}  // namespace twinpipe::execute::cuda
