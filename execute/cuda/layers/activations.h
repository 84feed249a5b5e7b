// Element-wise activations on the GPU: ReLU (saves its output) and the tanh
// approximation of GELU (saves its input), as on the CPU.
#pragma once

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

class Relu : public Layer {
 public:
  std::string_view Name() const override { return "relu"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;
};

class Gelu : public Layer {
 public:
  std::string_view Name() const override { return "gelu"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;
};

}  // namespace twinpipe::execute::cuda
