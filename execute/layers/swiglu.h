// SwiGLU's gating, elementwise over a (B, 2f) input whose columns are the
// gate's [0, f) and the up projection's [f, 2f) (the MLP's first linear makes
// both, as Megatron-Core runs gate and up as one GEMM):
// y (B, f) = silu(gate) * up, silu(a) = a / (1 + e^-a).
//
//   Swiglu act;  Tensor y = act.Forward(gate_and_up, saved, Mode::kTrain);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class Swiglu : public Layer {
 public:
  std::string_view Name() const override { return "swiglu"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;  // saves x
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
};

}  // namespace twinpipe::execute
