// Rectified linear unit, elementwise: y = max(x, 0).
//
//   Relu relu;  Tensor y = relu.Forward(x, saved, Mode::kTrain);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class Relu : public Layer {
 public:
  std::string_view Name() const override { return "relu"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;  // saves y
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
};

}  // namespace twinpipe::execute
