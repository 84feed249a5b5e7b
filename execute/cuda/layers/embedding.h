// Token and position embedding on the GPU: ids (B, S) as floats to (B*S, d)
// rows token[id] + position[t] (token[id] alone without a position table);
// the tables' gradients are a scatter-add (atomic, so their low bits may vary
// run to run), left to W in the split.
#pragma once

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

class Embedding : public WeightedLayer {
 public:
  Embedding(int vocab, int seq, int d, const std::vector<Param*>& init);  // init: token[, position]
  std::string_view Name() const override { return "embedding"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& ids, Saved& saved, Mode mode) override;
  std::vector<DeviceParam*> Params() override {
    if (positions_) return {&token_, &position_};
    return {&token_};
  }

 protected:
  DeviceTensor InputGradient(const Context& ctx, const DeviceTensor& dy) override;  // none: empty
  void AddWeightGradients(const Context& ctx, const DeviceTensor& dy, const DeviceTensor& ids) override;

 private:
  int vocab_, seq_, d_;
  bool positions_;
  DeviceParam token_, position_;
};

}  // namespace twinpipe::execute::cuda
