// Batch normalisation of images on the GPU: rows of (C, H, W) viewed as
// (B H W, C) rows for BatchNorm (a transpose kernel each way), with its
// micro-batch semantics, as the CPU layer does.
#pragma once

#include "execute/cuda/layers/batchnorm.h"

namespace twinpipe::execute::cuda {

class BatchNorm2d : public Layer {
 public:
  BatchNorm2d(int channels, int pixels, float momentum, float eps, const std::vector<Param*>& init);
  std::string_view Name() const override { return "batchnorm2d"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;
  std::vector<DeviceParam*> Params() override { return bn_.Params(); }
  void EndStep(const Context& ctx) override { bn_.EndStep(ctx); }
  void AppendState(const Context& ctx, std::vector<double>& out) const override { bn_.AppendState(ctx, out); }

 private:
  DeviceTensor Transposed(const Context& ctx, const DeviceTensor& t, bool to_rows) const;
  int c_, hw_;
  BatchNorm bn_;
};

}  // namespace twinpipe::execute::cuda
