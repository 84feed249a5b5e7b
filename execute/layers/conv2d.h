// 3x3 convolution, padding 1, stride 1 or 2, no bias, over rows that each
// hold one sample's (C, H, W) image: im2col, then one GEMM per sample
// (2 Ho Wo Cin Cout 9 FLOPs each way, as the cost model counts). Saves its
// input and rebuilds the columns in backward.
//
//   Conv2d conv(seed, /*in_channels=*/3, /*out_channels=*/16, /*image=*/32, /*stride=*/1);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class Conv2d : public WeightedLayer {
 public:
  Conv2d(uint64_t seed, int in_channels, int out_channels, int image, int stride);
  std::string_view Name() const override { return "conv2d"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;
  std::vector<Param*> Params() override { return {&weight_}; }
  int out_image() const { return out_; }
  int in_channels() const { return cin_; }
  int out_channels() const { return cout_; }
  int in_image() const { return in_; }
  int stride() const { return stride_; }

 protected:
  Tensor InputGradient(const Tensor& dy) const override;
  void AddWeightGradients(const Tensor& dy, const Tensor& x) override;

 private:
  void Im2Col(const float* image, float* cols) const;
  int cin_, cout_, in_, out_, stride_;
  Param weight_;  // (cout, cin * 9)
};

}  // namespace twinpipe::execute
