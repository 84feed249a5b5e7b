// Root-mean-square normalisation over each row's features on the GPU, with a
// learned scale and no shift (the CPU RmsNorm's arithmetic): a block per row,
// the mean square in double as on the CPU.
#pragma once

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

class RmsNorm : public Layer {
 public:
  RmsNorm(int features, float eps, const std::vector<Param*>& init);  // init: gain
  std::string_view Name() const override { return "rmsnorm"; }
  // Saves xhat = x rstd and rstd.
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;
  std::vector<DeviceParam*> Params() override { return {&gain_}; }

 private:
  int c_;
  float eps_;
  DeviceParam gain_;
};

}  // namespace twinpipe::execute::cuda
