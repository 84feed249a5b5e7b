// Fully connected layer on the GPU: y (B, out) = x (B, in) W^T + b, W (out, in);
// without a bias when the CPU twin has none. In BF16 the three products read
// bf16 operands, each converted once: W once per optimizer step (its copy,
// bf16.h), x once per forward (saved in bf16 for the weight gradient, in
// place of x: half the bytes), dy once per Backward (once in I and again in
// W under the I/W split). The bias and its gradient stay fp32.
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
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;
  std::vector<DeviceParam*> Params() override {
    if (has_bias_) return {&weight_, &bias_};
    return {&weight_};
  }

 protected:
  DeviceTensor InputGradient(const Context& ctx, const DeviceTensor& dy) override;
  void AddWeightGradients(const Context& ctx, const DeviceTensor& dy, const DeviceTensor& x) override;

 private:
  // dy_gemm: dy as the weight gradient's product takes it (in BF16, dy in
  // bf16); the bias gradient sums dy.
  void WeightGradients(const Context& ctx, const DeviceTensor& dy, const DeviceTensor& dy_gemm,
                       const DeviceTensor& x);
  int in_, out_;
  bool has_bias_;
  DeviceParam weight_, bias_;
};

}  // namespace twinpipe::execute::cuda
