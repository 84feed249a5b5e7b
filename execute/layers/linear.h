// Fully connected layer: y (B, out) = x (B, in) W^T + b, W is (out, in).
//
//   Linear fc(seed, /*in=*/32, /*out=*/64);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class Linear : public WeightedLayer {
 public:
  // Kaiming-uniform-style init from `seed`, bound 1/sqrt(in).
  Linear(uint64_t seed, int in, int out);
  std::string_view Name() const override { return "linear"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;  // saves x
  std::vector<Param*> Params() override { return {&weight_, &bias_}; }
  int in() const { return in_; }
  int out() const { return out_; }

 protected:
  Tensor InputGradient(const Tensor& dy) const override;
  void AddWeightGradients(const Tensor& dy, const Tensor& x) override;

 private:
  int in_, out_;
  Param weight_, bias_;
};

}  // namespace twinpipe::execute
