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

// In BF16 the products that read W read its bf16 copy, made once per
// optimizer step (bf16.h).
DeviceTensor Linear::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  DeviceTensor y = ctx.Alloc(x.rows(), out_);
  if (has_bias_) BroadcastRow(ctx, bias_.value.get(), y);
  const float beta = has_bias_ ? 1.f : 0.f;
  if (ctx.precision == Precision::kBf16) {
    Gemm(ctx, false, true, x.rows(), out_, in_, 1.f, ToBf16(ctx, x).bf16(), ValueBf16(ctx, weight_), beta,
         y.data());  // y (+)= x W^T
  } else {
    Gemm(ctx, false, true, x.rows(), out_, in_, 1.f, x.data(), weight_.value.get(), beta, y.data());
  }
  if (mode != Mode::kEval) saved.t = {x};
  return y;
}

DeviceTensor Linear::InputGradient(const Context& ctx, const DeviceTensor& dy) {
  DeviceTensor dx = ctx.Alloc(dy.rows(), in_);
  if (ctx.precision == Precision::kBf16) {
    Gemm(ctx, false, false, dy.rows(), in_, out_, 1.f, ToBf16(ctx, dy).bf16(), ValueBf16(ctx, weight_), 0.f,
         dx.data());  // dy W
  } else {
    Gemm(ctx, false, false, dy.rows(), in_, out_, 1.f, dy.data(), weight_.value.get(), 0.f, dx.data());
  }
  return dx;
}

void Linear::AddWeightGradients(const Context& ctx, const DeviceTensor& dy, const DeviceTensor& x) {
  Gemm(ctx, true, false, out_, in_, x.rows(), 1.f, dy.data(), x.data(), 1.f, weight_.grad.get());  // += dy^T x
  if (has_bias_) ColumnSumInto(ctx, dy, bias_.grad.get());
}

}  // namespace twinpipe::execute::cuda
