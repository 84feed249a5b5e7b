#include "execute/cuda/layers/batchnorm2d.h"

#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

// images (B, C HW) <-> rows (B HW, C); i indexes the images' layout.
__global__ void ImagesRows(const float* src, float* dst, int c, int hw, long long n, bool to_rows) {
  TP_GRID_STRIDE(i, n) {
    const long long b = i / (static_cast<long long>(c) * hw);
    const int ch = static_cast<int>(i / hw % c), p = static_cast<int>(i % hw);
    const long long r = (b * hw + p) * c + ch;
    if (to_rows) {
      dst[r] = src[i];
    } else {
      dst[i] = src[r];
    }
  }
}

}  // namespace

BatchNorm2d::BatchNorm2d(int channels, int pixels, float momentum, float eps, const std::vector<Param*>& init)
    : c_(channels), hw_(pixels), bn_(channels, momentum, eps, init) {}

DeviceTensor BatchNorm2d::Transposed(const Context& ctx, const DeviceTensor& t, bool to_rows) const {
  const int B = to_rows ? t.rows() : t.rows() / hw_;
  DeviceTensor out = to_rows ? ctx.Alloc(B * hw_, c_) : ctx.Alloc(B, c_ * hw_);
  ImagesRows<<<Blocks(t.size()), kThreads, 0, ctx.stream>>>(t.data(), out.data(), c_, hw_, t.size(), to_rows);
  Launched("batchnorm2d transpose");
  return out;
}

DeviceTensor BatchNorm2d::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  return Transposed(ctx, bn_.Forward(ctx, Transposed(ctx, x, true), saved, mode), false);
}

DeviceTensor BatchNorm2d::Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) {
  return Transposed(ctx, bn_.Backward(ctx, Transposed(ctx, dy, true), saved), false);
}

}  // namespace twinpipe::execute::cuda
