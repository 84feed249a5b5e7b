// A pre-norm transformer block over (B*S, d) rows, built as the transformer
// generator's options say (cost_models/generators.h):
//   h = x + Attention(Norm(x));  y = h + Down(Act(Up(Norm(h))))
// Norm: layernorm or rmsnorm; Attention: kv_heads K/V heads, rotary or no
// positions; the MLP: gelu (Up d -> f, GELU), squared-relu (Up d -> f,
// relu^2) or swiglu (Up d -> 2f making gate and up, silu(gate) * up); Down
// f -> d; biases on the four linears or none. Parameters as the cost model
// counts them (GPT's default: 4 d^2 + 2 d f + f + 9 d). `attention: fused`
// is a kernel choice, the same numbers: this block computes them unfused.
//
//   TransformerBlock gpt(seed, /*d=*/256, /*ffn=*/1024, /*heads=*/4, /*seq=*/128, /*causal=*/true);
//   TransformerBlock llama(seed, spec);   // a cost::TransformerSpec
#pragma once

#include <memory>

#include "cost_models/generators.h"
#include "execute/layers/layer.h"

namespace twinpipe::execute {

class TransformerBlock : public Layer {
 public:
  TransformerBlock(uint64_t seed, int d, int ffn, int heads, int seq, bool causal);
  TransformerBlock(uint64_t seed, const cost::TransformerSpec& spec);
  std::string_view Name() const override { return "transformer_block"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
  Tensor BackwardInput(const Tensor& dy, Saved& saved) override;
  void BackwardWeight(Saved& saved) override;
  std::vector<Param*> Params() override;
  // norm1, attention | norm2, up, activation, down: x + attention branch, then + MLP branch.
  const std::vector<std::unique_ptr<Layer>>& inner() const { return inner_; }

 private:
  // Back through both residual branches with `step(i, g)` for inner layer i.
  template <typename Step>
  Tensor BackThrough(const Tensor& dy, Step step);
  std::vector<std::unique_ptr<Layer>> inner_;
};

}  // namespace twinpipe::execute
