// Fully connected layer: y (B, out) = x (B, in) W^T + b, W is (out, in); the
// bias is optional (Llama's linears have none).
//
//   Linear fc(seed, /*in=*/32, /*out=*/64);
//   Linear proj(seed, 64, 64, /*bias=*/false);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class Linear : public WeightedLayer {
 public:
  // Kaiming-uniform-style init from `seed`, bound 1/sqrt(in).
  Linear(uint64_t seed, int in, int out, bool bias = true);
  std::string_view Name() const override { return "linear"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;  // saves x
  std::vector<Param*> Params() override {
    if (has_bias_) return {&weight_, &bias_};
    return {&weight_};
  }
  int in() const { return in_; }
  int out() const { return out_; }
  bool has_bias() const { return has_bias_; }
  // Makes the weight a tied copy of another layer's (out, in) table (the
  // logits of a token embedding's): its value, and Tie::kCopy.
  void TieWeight(std::vector<float> value);

 protected:
  Tensor InputGradient(const Tensor& dy) const override;
  void AddWeightGradients(const Tensor& dy, const Tensor& x) override;

 private:
  int in_, out_;
  bool has_bias_;
  Param weight_, bias_;
};

}  // namespace twinpipe::execute
