// Batch normalisation over the rows of a (B, C) tensor, per feature. In
// training each micro-batch is normalised with its own statistics (GPipe's
// semantics); the running statistics used for evaluation are folded once
// per mini-batch, at STEP, from the statistics of all its micro-batches'
// rows together (unbiased variance, momentum 0.1). A recompute (R) does not
// count its rows again.
//
//   BatchNorm bn(64);  bn.Forward(x, saved, Mode::kTrain);  bn.EndStep();
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class BatchNorm : public Layer {
 public:
  explicit BatchNorm(int features, float momentum = 0.1f, float eps = 1e-5f);
  std::string_view Name() const override { return "batchnorm"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;  // saves xhat, rstd
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
  std::vector<Param*> Params() override { return {&gamma_, &beta_}; }
  void EndStep() override;
  void AppendState(std::vector<double>& out) const override {
    out.insert(out.end(), running_mean_.begin(), running_mean_.end());
    out.insert(out.end(), running_var_.begin(), running_var_.end());
  }
  int features() const { return c_; }
  float momentum() const { return momentum_; }
  float eps() const { return eps_; }

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
