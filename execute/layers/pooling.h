// Global average pooling: rows of (C, H, W) images to rows of C channel means.
//
//   GlobalAvgPool pool(/*channels=*/64, /*pixels=*/4 * 4);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class GlobalAvgPool : public Layer {
 public:
  GlobalAvgPool(int channels, int pixels) : c_(channels), hw_(pixels) {}
  std::string_view Name() const override { return "global_avg_pool"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override;  // saves nothing
  Tensor Backward(const Tensor& dy, const Saved& saved) override;
  int channels() const { return c_; }
  int pixels() const { return hw_; }

 private:
  int c_, hw_;
};

}  // namespace twinpipe::execute
