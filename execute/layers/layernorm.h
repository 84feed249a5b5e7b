// Layer normalisation over the features of each row of a (B, C) tensor,
// with a learned scale (gamma) and shift (beta).
//
//   LayerNorm ln(64);  Tensor y = ln.Forward(x, saved, Mode::kTrain);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class LayerNorm : public Layer {
 public:
  explicit LayerNorm(int features, float eps = 1e-5f);
  std::string_view Name() const override { return "layernorm"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;  // saves xhat, rstd
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
  std::vector<Param*> Params() override { return {&gamma_, &beta_}; }
  int features() const { return c_; }
  float eps() const { return eps_; }

 private:
  int c_;
  float eps_;
  Param gamma_, beta_;
};

}  // namespace twinpipe::execute
