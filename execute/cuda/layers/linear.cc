#include "execute/cuda/layers/linear.h"

#include "execute/cuda/bf16.h"
#include "execute/cuda/elementwise.h"
#include "execute/cuda/gemm.h"

namespace twinpipe::execute::cuda {

Linear::Linear(int in, int out, const std::vector<Param*>& init)
    : in_(in), out_(out), has_bias_(init.size() > 1), weight_(Upload(*init.at(0))) {
  weight_.keeps_bf16 = true;
  if (has_bias_) bias_ = Upload(*init[1]);
}

DeviceTensor Linear::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  DeviceTensor y = ctx.Alloc(x.rows(), out_);
  if (has_bias_) BroadcastRow(ctx, bias_.value.get(), y);
  const float beta = has_bias_ ? 1.f : 0.f;
  if (ctx.precision != Precision::kBf16) {
    Gemm(ctx, false, true, x.rows(), out_, in_, 1.f, x.data(), weight_.value.get(), beta, y.data());  // y (+)= x W^T
    if (mode != Mode::kEval) saved.t = {x};
    return y;
  }
  const DeviceTensor x16 = ToBf16(ctx, x);  // (B, in) bf16, for this product and the weight gradient's
  Gemm(ctx, false, true, x.rows(), out_, in_, 1.f, x16.bf16(), ValueBf16(ctx, weight_), beta, y.data());
  if (mode != Mode::kEval) saved.t = {x16};
  return y;
}

DeviceTensor Linear::Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) {
  if (ctx.precision != Precision::kBf16) return WeightedLayer::Backward(ctx, dy, saved);
  const DeviceTensor dy16 = ToBf16(ctx, dy);  // (B, out) bf16, for both products
  DeviceTensor dx = InputGradient(ctx, dy16);
  WeightGradients(ctx, dy, dy16, saved.t.at(0));
  return dx;
}

// dy: fp32, or in BF16 already bf16 (Backward's).
DeviceTensor Linear::InputGradient(const Context& ctx, const DeviceTensor& dy) {
  DeviceTensor dx = ctx.Alloc(dy.rows(), in_);
  if (ctx.precision != Precision::kBf16) {
    Gemm(ctx, false, false, dy.rows(), in_, out_, 1.f, dy.data(), weight_.value.get(), 0.f, dx.data());  // dy W
    return dx;
  }
  Gemm(ctx, false, false, dy.rows(), in_, out_, 1.f, ToBf16(ctx, dy).bf16(), ValueBf16(ctx, weight_), 0.f, dx.data());
  return dx;
}

// W of the I/W split: dy is the fp32 one BackwardInput saved.
void Linear::AddWeightGradients(const Context& ctx, const DeviceTensor& dy, const DeviceTensor& x) {
  WeightGradients(ctx, dy, ctx.precision == Precision::kBf16 ? ToBf16(ctx, dy) : dy, x);
}

// x: what Forward saved (in BF16, bf16).
void Linear::WeightGradients(const Context& ctx, const DeviceTensor& dy, const DeviceTensor& dy_gemm,
                             const DeviceTensor& x) {
  float* dw = weight_.grad.get();
  if (ctx.precision != Precision::kBf16) {
    Gemm(ctx, true, false, out_, in_, x.rows(), 1.f, dy_gemm.data(), x.data(), 1.f, dw);  // += dy^T x
  } else {
    Gemm(ctx, true, false, out_, in_, x.rows(), 1.f, dy_gemm.bf16(), ToBf16(ctx, x).bf16(), 1.f, dw);
  }
  if (has_bias_) ColumnSumInto(ctx, dy, bias_.grad.get());
}

}  // namespace twinpipe::execute::cuda
