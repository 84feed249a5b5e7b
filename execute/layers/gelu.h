// GELU, elementwise, tanh approximation:
// y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
//
//   Gelu gelu;  Tensor y = gelu.Forward(x, saved, Mode::kTrain);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class Gelu : public Layer {
 public:
  std::string_view Name() const override { return "gelu"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;  // saves x
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
};

}  // namespace twinpipe::execute
