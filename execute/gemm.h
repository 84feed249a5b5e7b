// fp32 GEMM through OpenBLAS: C (m x n) = alpha op(A) op(B) + beta C,
// row-major, op = transpose when asked.
//
//   Gemm(false, true, B, out, in, 1.f, x, W, 0.f, y);   // y (B,out) = x (B,in) W^T
#pragma once

namespace twinpipe::execute {

void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
          float* c);

// Keeps OpenBLAS to one thread: each device worker is one thread already.
void UseOneBlasThread();

}  // namespace twinpipe::execute
