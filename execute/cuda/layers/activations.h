// Element-wise activations on the GPU, as on the CPU: ReLU (saves its
// output), the tanh approximation of GELU, squared ReLU, and SwiGLU's gating
// of a (B, 2f) input [gate | up] to (B, f) silu(gate) * up (each saves its
// input).
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

class SquaredRelu : public Layer {
 public:
  std::string_view Name() const override { return "squared_relu"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;
};

class Swiglu : public Layer {
 public:
  std::string_view Name() const override { return "swiglu"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;
};

}  // namespace twinpipe::execute::cuda
