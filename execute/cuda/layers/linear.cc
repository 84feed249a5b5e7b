#include "execute/cuda/layers/linear.h"

#include "execute/cuda/elementwise.h"
#include "execute/cuda/gemm.h"

namespace twinpipe::execute::cuda {

Linear::Linear(int in, int out, const std::vector<Param*>& init)
    : in_(in), out_(out), has_bias_(init.size() > 1), weight_(Upload(*init.at(0))) {
  if (has_bias_) bias_ = Upload(*init[1]);
}

DeviceTensor Linear::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  DeviceTensor y = ctx.Alloc(x.rows(), out_);
  if (has_bias_) BroadcastRow(ctx, bias_.value.get(), y);
  Gemm(ctx, false, true, x.rows(), out_, in_, 1.f, x.data(), weight_.value.get(), has_bias_ ? 1.f : 0.f, y.data());
  if (mode != Mode::kEval) saved.t = {x};
  return y;
}

DeviceTensor Linear::InputGradient(const Context& ctx, const DeviceTensor& dy) {
  DeviceTensor dx = ctx.Alloc(dy.rows(), in_);
  Gemm(ctx, false, false, dy.rows(), in_, out_, 1.f, dy.data(), weight_.value.get(), 0.f, dx.data());  // dy W
  return dx;
}

void Linear::AddWeightGradients(const Context& ctx, const DeviceTensor& dy, const DeviceTensor& x) {
  Gemm(ctx, true, false, out_, in_, x.rows(), 1.f, dy.data(), x.data(), 1.f, weight_.grad.get());  // += dy^T x
  if (has_bias_) ColumnSumInto(ctx, dy, bias_.grad.get());
}

}  // namespace twinpipe::execute::cuda
