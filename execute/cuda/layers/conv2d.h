// 3x3 convolution (padding 1, stride 1 or 2, no bias) on the GPU, over rows
// that each hold one sample's (C, H, W) image: im2col and col2im kernels and
// one cuBLAS GEMM per sample, as the CPU layer computes it.
#pragma once

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

class Conv2d : public WeightedLayer {
 public:
  Conv2d(int in_channels, int out_channels, int image, int stride, const std::vector<Param*>& init);
  std::string_view Name() const override { return "conv2d"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  std::vector<DeviceParam*> Params() override { return {&weight_}; }

 protected:
  DeviceTensor InputGradient(const Context& ctx, const DeviceTensor& dy) override;
  void AddWeightGradients(const Context& ctx, const DeviceTensor& dy, const DeviceTensor& x) override;

 private:
  int cin_, cout_, in_, out_, stride_;
  DeviceParam weight_;  // (cout, cin * 9)
};

}  // namespace twinpipe::execute::cuda
