// Inner layers applied in turn, plus the block's input when residual: the
// GPU twin of both the CPU Sequential and ResidualBlock.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

class Block : public Layer {
 public:
  Block(std::string name, std::vector<std::unique_ptr<Layer>> inner, bool residual)
      : name_(std::move(name)), residual_(residual), inner_(std::move(inner)) {}
  std::string_view Name() const override { return name_; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;
  DeviceTensor BackwardInput(const Context& ctx, const DeviceTensor& dy, Saved& saved) override;
  void BackwardWeight(const Context& ctx, Saved& saved) override;
  std::vector<DeviceParam*> Params() override;
  void EndStep(const Context& ctx) override;
  void AppendState(const Context& ctx, std::vector<double>& out) const override {
    for (const auto& l : inner_) l->AppendState(ctx, out);
  }

 private:
  template <typename Step>
  DeviceTensor BackThrough(const Context& ctx, const DeviceTensor& dy, Step step);
  std::string name_;
  bool residual_;
  std::vector<std::unique_ptr<Layer>> inner_;
};

}  // namespace twinpipe::execute::cuda
