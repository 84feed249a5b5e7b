// Layer normalisation over each row's features on the GPU, with a learned
// scale and shift: a block per row, statistics in double as on the CPU.
#pragma once

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

class LayerNorm : public Layer {
 public:
  LayerNorm(int features, float eps, const std::vector<Param*>& init);  // init: gamma, beta
  std::string_view Name() const override { return "layernorm"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;  // saves xhat, rstd
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;
  std::vector<DeviceParam*> Params() override { return {&gamma_, &beta_}; }

 private:
  int c_;
  float eps_;
  DeviceParam gamma_, beta_;
};

}  // namespace twinpipe::execute::cuda
