// Fully connected layer on the GPU: y (B, out) = x (B, in) W^T + b, W (out, in);
// without a bias when the CPU twin has none.
//
//   cuda::Linear fc(in, out, cpu_linear.Params());
#pragma once

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

class Linear : public WeightedLayer {
 public:
  // `init`: the CPU twin's weight, and its bias if it has one.
  Linear(int in, int out, const std::vector<Param*>& init);
  std::string_view Name() const override { return "linear"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  std::vector<DeviceParam*> Params() override {
    if (has_bias_) return {&weight_, &bias_};
    return {&weight_};
  }

 protected:
  DeviceTensor InputGradient(const Context& ctx, const DeviceTensor& dy) override;
  void AddWeightGradients(const Context& ctx, const DeviceTensor& dy, const DeviceTensor& x) override;

 private:
  int in_, out_;
  bool has_bias_;
  DeviceParam weight_, bias_;
};

}  // namespace twinpipe::execute::cuda
