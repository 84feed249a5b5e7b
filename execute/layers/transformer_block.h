// A pre-LayerNorm transformer block over (B*S, d) rows:
//   h = x + Attention(LayerNorm(x));  y = h + W2 GELU(W1 LayerNorm(h) + b1) + b2
// Parameters as the cost model counts them: 4 d^2 + 2 d f + f + 9 d.
//
//   TransformerBlock blk(seed, /*d=*/256, /*ffn=*/1024, /*heads=*/4, /*seq=*/128, /*causal=*/true);
#pragma once

#include <memory>

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class TransformerBlock : public Layer {
 public:
  TransformerBlock(uint64_t seed, int d, int ffn, int heads, int seq, bool causal);
  std::string_view Name() const override { return "transformer_block"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
  Tensor BackwardInput(const Tensor& dy, Saved& saved) override;
  void BackwardWeight(Saved& saved) override;
  std::vector<Param*> Params() override;
  // ln1, attention | ln2, fc1, gelu, fc2: x + attention branch, then + MLP branch.
  const std::vector<std::unique_ptr<Layer>>& inner() const { return inner_; }

 private:
  // Back through both residual branches with `step(i, g)` for inner layer i.
  template <typename Step>
  Tensor BackThrough(const Tensor& dy, Step step);
  // ln1, attention | ln2, fc1, gelu, fc2
  std::vector<std::unique_ptr<Layer>> inner_;
};

}  // namespace twinpipe::execute
