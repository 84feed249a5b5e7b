// Batch normalisation over the rows of a (B, C) tensor on the GPU, with
// GPipe's micro-batch semantics exactly as the CPU layer (layers/batchnorm.h):
// each micro-batch normalised with its own statistics; running statistics
// folded at STEP from the mini-batch's rows (a recompute does not count them).
#pragma once

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

class BatchNorm : public Layer {
 public:
  BatchNorm(int features, float momentum, float eps, const std::vector<Param*>& init);  // init: gamma, beta
  std::string_view Name() const override { return "batchnorm"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;
  std::vector<DeviceParam*> Params() override { return {&gamma_, &beta_}; }
  void EndStep(const Context& ctx) override;
  void AppendState(const Context& ctx, std::vector<double>& out) const override;

 private:
  int c_;
  float momentum_, eps_;
  DeviceParam gamma_, beta_;
  // Doubles, held as pairs of floats' storage: running mean and variance,
  // this step's sums of x and x^2.
  DeviceBuffer running_, step_sums_;
  int64_t step_rows_ = 0;
};

}  // namespace twinpipe::execute::cuda
