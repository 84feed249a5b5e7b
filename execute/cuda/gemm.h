// Row-major GEMM on the GPU through cuBLAS, C (m x n) = alpha op(A) op(B) +
// beta C, in the context's precision (fp32, TF32, or BF16 inputs with fp32
// accumulation: each operand's span converted on the stream, keeping its
// layout), or on operands already in bf16 (bf16.h: a weight's copy made once
// per step, an activation converted once for several products). Row-major
// operands are handed to column-major cuBLAS as their transposes:
// C^T = op(B)^T op(A)^T.
//
//   Gemm(ctx, false, true, B, out, in, 1.f, x, in, W, in, 0.f, y, out);  // y = x W^T
#pragma once

#include <cuda_bf16.h>

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

void Gemm(const Context& ctx, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

// bf16 operands, fp32 accumulation and fp32 C, whatever ctx.precision says
// (its callers convert only in Precision::kBf16).
void Gemm(const Context& ctx, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const __nv_bfloat16* a,
          int lda, const __nv_bfloat16* b, int ldb, float beta, float* c, int ldc);

// `count` independent products, the i-th with its operands at a + i * stride_a,
// b + i * stride_b and c + i * stride_c (elements): one cuBLAS call, as
// attention's per-head products need (a call per head would be bound by the
// host's launch rate, not the GPU). In BF16 each operand's whole span is
// converted once.
void GemmStridedBatched(const Context& ctx, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                        const float* a, int lda, long long stride_a, const float* b, int ldb, long long stride_b,
                        float beta, float* c, int ldc, long long stride_c, int count);

// Packed operands (leading dimensions from the shapes).
inline void Gemm(const Context& ctx, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                 const float* b, float beta, float* c) {
  Gemm(ctx, trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}
inline void Gemm(const Context& ctx, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                 const __nv_bfloat16* a, const __nv_bfloat16* b, float beta, float* c) {
  Gemm(ctx, trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

}  // namespace twinpipe::execute::cuda
