// Root-mean-square normalisation over the features of each row of a (B, C)
// tensor, with a learned scale g and no shift or mean (Llama's):
// y = x / sqrt(mean(x^2) + eps) * g.
//
//   RmsNorm norm(64);  Tensor y = norm.Forward(x, saved, Mode::kTrain);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class RmsNorm : public Layer {
 public:
  explicit RmsNorm(int features, float eps = 1e-5f);
  std::string_view Name() const override { return "rmsnorm"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;  // saves xhat = x rstd, rstd
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
  std::vector<Param*> Params() override { return {&gain_}; }
  int features() const { return c_; }
  float eps() const { return eps_; }

 private:
  int c_;
  float eps_;
  Param gain_;
};

}  // namespace twinpipe::execute
