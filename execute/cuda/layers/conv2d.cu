#include "execute/cuda/layers/conv2d.h"

#include "execute/cuda/gemm.h"
#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

// cols[(c*9 + ky*3 + kx), (oy*out + ox)] = image[c, oy s + ky - 1, ox s + kx - 1], 0 outside.
__global__ void Im2Col(const float* image, int cin, int in, int out, int stride, float* cols) {
  const long long hw = static_cast<long long>(out) * out, n = static_cast<long long>(cin) * 9 * hw;
  TP_GRID_STRIDE(i, n) {
    const long long k = i / hw, pix = i % hw;
    const int c = static_cast<int>(k / 9), ky = static_cast<int>(k % 9) / 3, kx = static_cast<int>(k % 3);
    const int oy = static_cast<int>(pix / out), ox = static_cast<int>(pix % out);
    const int iy = oy * stride + ky - 1, ix = ox * stride + kx - 1;
    cols[i] = iy >= 0 && iy < in && ix >= 0 && ix < in ? image[(static_cast<long long>(c) * in + iy) * in + ix] : 0.f;
  }
}

// col2im as a gather: each input pixel sums the column entries it fed
// (deterministic, no atomics).
__global__ void Col2Im(const float* cols, int cin, int in, int out, int stride, float* image) {
  const long long n = static_cast<long long>(cin) * in * in, hw = static_cast<long long>(out) * out;
  TP_GRID_STRIDE(i, n) {
    const int c = static_cast<int>(i / (static_cast<long long>(in) * in));
    const int iy = static_cast<int>(i / in % in), ix = static_cast<int>(i % in);
    float s = 0;
    for (int ky = 0; ky < 3; ++ky) {
      const int ty = iy + 1 - ky;
      if (ty < 0 || ty % stride != 0 || ty / stride >= out) continue;
      for (int kx = 0; kx < 3; ++kx) {
        const int tx = ix + 1 - kx;
        if (tx < 0 || tx % stride != 0 || tx / stride >= out) continue;
        s += cols[(static_cast<long long>(c) * 9 + ky * 3 + kx) * hw + (ty / stride) * out + tx / stride];
      }
    }
    image[i] = s;
  }
}

}  // namespace

Conv2d::Conv2d(int in_channels, int out_channels, int image, int stride, const std::vector<Param*>& init)
    : cin_(in_channels), cout_(out_channels), in_(image), out_((image - 1) / stride + 1), stride_(stride),
      weight_(Upload(*init.at(0))) {}

DeviceTensor Conv2d::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  const int B = x.rows(), hw = out_ * out_;
  DeviceTensor y = ctx.Alloc(B, cout_ * hw), cols = ctx.Alloc(cin_ * 9, hw);
  for (int b = 0; b < B; ++b) {
    Im2Col<<<Blocks(cols.size()), kThreads, 0, ctx.stream>>>(x.data() + int64_t{b} * x.cols(), cin_, in_, out_,
                                                             stride_, cols.data());
    Launched("conv2d im2col");
    Gemm(ctx, false, false, cout_, hw, cin_ * 9, 1.f, weight_.value.get(), cols.data(), 0.f,
         y.data() + int64_t{b} * y.cols());
  }
  if (mode != Mode::kEval) saved.t = {x};
  return y;
}

DeviceTensor Conv2d::InputGradient(const Context& ctx, const DeviceTensor& dy) {
  const int B = dy.rows(), hw = out_ * out_;
  DeviceTensor dx = ctx.Alloc(B, cin_ * in_ * in_), dcols = ctx.Alloc(cin_ * 9, hw);
  for (int b = 0; b < B; ++b) {
    Gemm(ctx, true, false, cin_ * 9, hw, cout_, 1.f, weight_.value.get(), dy.data() + int64_t{b} * dy.cols(), 0.f,
         dcols.data());
    Col2Im<<<Blocks(int64_t{cin_} * in_ * in_), kThreads, 0, ctx.stream>>>(dcols.data(), cin_, in_, out_, stride_,
                                                                           dx.data() + int64_t{b} * dx.cols());
    Launched("conv2d col2im");
  }
  return dx;
}

void Conv2d::AddWeightGradients(const Context& ctx, const DeviceTensor& dy, const DeviceTensor& x) {
  const int B = dy.rows(), hw = out_ * out_;
  DeviceTensor cols = ctx.Alloc(cin_ * 9, hw);
  for (int b = 0; b < B; ++b) {
    Im2Col<<<Blocks(cols.size()), kThreads, 0, ctx.stream>>>(x.data() + int64_t{b} * x.cols(), cin_, in_, out_,
                                                             stride_, cols.data());
    Launched("conv2d im2col");
    Gemm(ctx, false, true, cout_, cin_ * 9, hw, 1.f, dy.data() + int64_t{b} * dy.cols(), cols.data(), 1.f,
         weight_.grad.get());
  }
}

}  // namespace twinpipe::execute::cuda
