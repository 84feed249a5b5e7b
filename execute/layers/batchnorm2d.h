// Batch normalisation of images, per channel over every sample and pixel of
// a micro-batch, with BatchNorm's micro-batch semantics (its statistics in
// training, the mini-batch's folded into the running ones at STEP): rows of
// (C, H, W) are viewed as (B H W, C) rows for BatchNorm and back.
//
//   BatchNorm2d bn(/*channels=*/16, /*pixels=*/32 * 32);
#pragma once

#include "execute/layers/batchnorm.h"

namespace twinpipe::execute {

class BatchNorm2d : public Layer {
 public:
  BatchNorm2d(int channels, int pixels);
  std::string_view Name() const override { return "batchnorm2d"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
  std::vector<Param*> Params() override { return bn_.Params(); }
  void EndStep() override { bn_.EndStep(); }
  void AppendState(std::vector<double>& out) const override { bn_.AppendState(out); }
  int channels() const { return c_; }
  int pixels() const { return hw_; }
  const BatchNorm& rows_norm() const { return bn_; }

 private:
  Tensor ToRows(const Tensor& images) const;  // (B, C HW) -> (B HW, C)
  Tensor ToImages(const Tensor& rows) const;  // and back
  int c_, hw_;
  BatchNorm bn_;
};

}  // namespace twinpipe::execute
