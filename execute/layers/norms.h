// Normalisation layers over the feature axis of a (B, C) tensor.
// LayerNorm: per row. BatchNorm: per column over the micro-batch's rows in
// training (GPipe's per-micro-batch statistics); running statistics for
// evaluation are folded once per mini-batch, at STEP, from the statistics of
// the whole mini-batch (every micro-batch's rows together).
//
//   BatchNorm bn(64);  bn.Forward(x, saved, Mode::kTrain);  bn.EndStep();
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

 private:
  int c_;
  float eps_;
  Param gamma_, beta_;
};

class BatchNorm : public Layer {
 public:
  explicit BatchNorm(int features, float momentum = 0.1f, float eps = 1e-5f);
  std::string_view Name() const override { return "batchnorm"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;  // saves xhat, rstd
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
  std::vector<Param*> Params() override { return {&gamma_, &beta_}; }
  void EndStep() override;

  const std::vector<double>& running_mean() const { return running_mean_; }
  const std::vector<double>& running_var() const { return running_var_; }

 private:
  int c_;
  float momentum_, eps_;
  Param gamma_, beta_;
  std::vector<double> running_mean_, running_var_;
  std::vector<double> step_sum_, step_sum_sq_;  // this mini-batch so far
  int64_t step_rows_ = 0;
};

}  // namespace twinpipe::execute
