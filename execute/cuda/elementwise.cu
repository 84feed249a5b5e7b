#include "execute/cuda/elementwise.h"

#include <algorithm>

#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

__global__ void AddKernel(const float* a, const float* b, float* y, long long n) {
  TP_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

__global__ void BroadcastRowKernel(const float* row, float* out, long long n, int cols) {
  TP_GRID_STRIDE(i, n) out[i] = row[i % cols];
}

// Column sums in two passes, deterministic (a fixed order of additions) and
// parallel over rows as well as columns: a thread per column and lane of 8
// rows sums its rows of one chunk; the block adds its 8 lanes in order into
// partial[chunk][c]; FinishColumnSums adds the chunks in order. (A thread per
// column walking every row in turn leaves the GPU idle: 16 blocks and 4096
// dependent loads each for a transformer's bias gradients.)
constexpr int kLanes = 8;

__global__ void PartialColumnSums(const float* a, const float* b, int rows, int cols, int chunk, double* partial) {
  __shared__ double lane[kLanes][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const int first = blockIdx.y * chunk, end = min(rows, first + chunk);
  double s = 0;
  if (c < cols) {
    for (int r = first + threadIdx.y; r < end; r += kLanes) {
      const long long i = static_cast<long long>(r) * cols + c;
      s += b ? static_cast<double>(a[i]) * b[i] : static_cast<double>(a[i]);
    }
  }
  lane[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    double t = 0;
    for (int y = 0; y < kLanes; ++y) t += lane[y][threadIdx.x];
    partial[static_cast<long long>(blockIdx.y) * cols + c] = t;
  }
}

__global__ void FinishColumnSums(const double* partial, int chunks, int cols, float* out) {
  TP_GRID_STRIDE(c, cols) {
    double s = 0;
    for (int k = 0; k < chunks; ++k) s += partial[k * static_cast<long long>(cols) + c];
    out[c] += static_cast<float>(s);
  }
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

void ColumnSums(const Context& ctx, const float* a, const float* b, int rows, int cols, float* out) {
  if (rows == 0 || cols == 0) return;
  const int chunk = std::max(64, (rows + 31) / 32), chunks = (rows + chunk - 1) / chunk;
  void* p = nullptr;
  TP_CUDA(cudaMallocAsync(&p, static_cast<size_t>(chunks) * cols * sizeof(double), ctx.stream));
  auto* partial = static_cast<double*>(p);
  PartialColumnSums<<<dim3((cols + 31) / 32, chunks), dim3(32, kLanes), 0, ctx.stream>>>(a, b, rows, cols, chunk,
                                                                                         partial);
  Launched("column sums");
  FinishColumnSums<<<Blocks(cols), kThreads, 0, ctx.stream>>>(partial, chunks, cols, out);
  Launched("column sums, finish");
  TP_CUDA(cudaFreeAsync(p, ctx.stream));
}

void ColumnSumInto(const Context& ctx, const DeviceTensor& t, float* out) {
  ColumnSums(ctx, t.data(), nullptr, t.rows(), t.cols(), out);
}

}  // namespace twinpipe::execute::cuda
