#include "execute/cuda/elementwise.h"

#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

__global__ void AddKernel(const float* a, const float* b, float* y, long long n) {
  TP_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

__global__ void BroadcastRowKernel(const float* row, float* out, long long n, int cols) {
  TP_GRID_STRIDE(i, n) out[i] = row[i % cols];
}

// One thread per column, rows in order: deterministic sums.
__global__ void ColumnSumKernel(const float* t, int rows, int cols, float* out) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  double s = 0;
  for (int r = 0; r < rows; ++r) s += t[static_cast<long long>(r) * cols + c];
  out[c] += static_cast<float>(s);
}

}  // namespace

DeviceTensor Add(const Context& ctx, const DeviceTensor& a, const DeviceTensor& b) {
  DeviceTensor y = ctx.Alloc(a.rows(), a.cols());
  AddKernel<<<Blocks(a.size()), kThreads, 0, ctx.stream>>>(a.data(), b.data(), y.data(), a.size());
  Launched("add");
  return y;
}

void BroadcastRow(const Context& ctx, const float* row, DeviceTensor& out) {
  BroadcastRowKernel<<<Blocks(out.size()), kThreads, 0, ctx.stream>>>(row, out.data(), out.size(), out.cols());
  Launched("broadcast row");
}

void ColumnSumInto(const Context& ctx, const DeviceTensor& t, float* out) {
  ColumnSumKernel<<<Blocks(t.cols()), kThreads, 0, ctx.stream>>>(t.data(), t.rows(), t.cols(), out);
  Launched("column sum");
}

}  // namespace twinpipe::execute::cuda
