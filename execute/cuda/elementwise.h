// Small kernels several CUDA layers share.
//
//   DeviceTensor s = Add(ctx, a, b);          // a + b, a new tensor
//   ColumnSumInto(ctx, dy, bias_grad);        // grad[c] += sum_r dy[r, c]
#pragma once

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

DeviceTensor Add(const Context& ctx, const DeviceTensor& a, const DeviceTensor& b);
// out[r, c] = row[c] for every row.
void BroadcastRow(const Context& ctx, const float* row, DeviceTensor& out);
// out[c] += sum over r < rows of a[r, c] (times b[r, c] when b is given), for
// row-major (rows x cols) a and b; in double, in a fixed order.
void ColumnSums(const Context& ctx, const float* a, const float* b, int rows, int cols, float* out);
// out[c] += sum over rows of t[r, c].
void ColumnSumInto(const Context& ctx, const DeviceTensor& t, float* out);

}  // namespace twinpipe::execute::cuda
