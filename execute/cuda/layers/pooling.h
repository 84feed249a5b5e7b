// Global average pooling on the GPU: rows of (C, H, W) images to rows of C
// channel means.
#pragma once

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

class GlobalAvgPool : public Layer {
 public:
  GlobalAvgPool(int channels, int pixels) : c_(channels), hw_(pixels) {}
  std::string_view Name() const override { return "global_avg_pool"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;

 private:
  int c_, hw_;
};

}  // namespace twinpipe::execute::cuda
