// Squared ReLU (Primer's, Nemotron's MLP activation), elementwise:
// y = max(x, 0)^2, dy/dx = 2 max(x, 0).
//
//   SquaredRelu act;  Tensor y = act.Forward(x, saved, Mode::kTrain);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class SquaredRelu : public Layer {
 public:
  std::string_view Name() const override { return "squared_relu"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;  // saves x
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
};

}  // namespace twinpipe::execute
