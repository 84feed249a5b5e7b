// Inner layers applied in turn, plus the block's input when residual:
// y = x + f_n(...f_1(x)). The `mlp` generator's block is
// x + relu(linear(norm(x))) with norm none, layernorm or batchnorm (without
// the residual: relu(linear(norm(x)))); MakeConvBlock builds the CNN's.
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
  ResidualBlock(std::string name, std::vector<std::unique_ptr<Layer>> inner, bool residual);
  std::string_view Name() const override { return name_; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
  Tensor BackwardInput(const Tensor& dy, Saved& saved) override;
  void BackwardWeight(Saved& saved) override;
  std::vector<Param*> Params() override;
  void EndStep() override;
  void AppendState(std::vector<double>& out) const override {
    for (const auto& l : inner_) l->AppendState(out);
  }
  const std::vector<std::unique_ptr<Layer>>& inner() const { return inner_; }
  bool residual() const { return residual_; }

 private:
  template <typename Step>
  Tensor BackThrough(const Tensor& dy, Step step);
  std::string name_;
  bool residual_;
  std::vector<std::unique_ptr<Layer>> inner_;
};

}  // namespace twinpipe::execute
