// Multi-head self-attention on the GPU, the CPU layer's arithmetic: a fused
// QKV projection, per (sample, head) softmax(Q K^T / sqrt(d/h)) V with an
// optional causal mask (strided cuBLAS GEMMs, a softmax kernel per row), and
// an output projection. Saves QKV and the probabilities.
#pragma once

#include <memory>

#include "execute/cuda/layers/linear.h"

namespace twinpipe::execute::cuda {

class SelfAttention : public Layer {
 public:
  // init: the QKV projection's weight and bias, then the output projection's.
  SelfAttention(int d, int heads, int seq, bool causal, const std::vector<Param*>& init);
  std::string_view Name() const override { return "attention"; }
  DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) override;
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override;
  DeviceTensor BackwardInput(const Context& ctx, const DeviceTensor& dy, Saved& saved) override;
  void BackwardWeight(const Context& ctx, Saved& saved) override;
  std::vector<DeviceParam*> Params() override;

 private:
  DeviceTensor CoreBackward(const Context& ctx, const DeviceTensor& d_attn, const DeviceTensor& qkv,
                            const DeviceTensor& probs) const;
  int d_, heads_, seq_;
  bool causal_;
  Linear qkv_, out_;
};

}  // namespace twinpipe::execute::cuda
