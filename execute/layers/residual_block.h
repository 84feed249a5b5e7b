// The residual MLP block of the `mlp` generator: y = x + relu(linear(norm(x)))
// with norm none, layernorm or batchnorm (without the residual: y =
// relu(linear(norm(x)))).
//
//   ResidualBlock block(seed, 64, Norm::kLayerNorm, /*residual=*/true);
#pragma once

#include <memory>
#include <vector>

#include "cost_models/generators.h"
#include "execute/layers/layer.h"

namespace twinpipe::execute {

class ResidualBlock : public Layer {
 public:
  ResidualBlock(uint64_t seed, int width, cost::Norm norm, bool residual);
  std::string_view Name() const override { return residual_ ? "residual_block" : "block"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
  Tensor BackwardInput(const Tensor& dy, Saved& saved) override;
  void BackwardWeight(Saved& saved) override;
  std::vector<Param*> Params() override;
  void EndStep() override;

 private:
  template <typename Step>
  Tensor BackThrough(const Tensor& dy, Step step);
  bool residual_;
  std::vector<std::unique_ptr<Layer>> inner_;
};

}  // namespace twinpipe::execute
