#include "execute/cuda/gemm.h"

#include <algorithm>

#include "execute/cuda/bf16.h"
#include "execute/cuda/check.h"

namespace twinpipe::execute::cuda {
namespace {

// A span of n floats converted into a stream-ordered bf16 scratch buffer,
// freed on the stream after its product.
__nv_bfloat16* Bf16Span(const Context& ctx, const float* src, long long n) {
  void* p = nullptr;
  TP_CUDA(cudaMallocAsync(&p, static_cast<size_t>(std::max<long long>(1, n)) * sizeof(__nv_bfloat16), ctx.stream));
  auto* dst = static_cast<__nv_bfloat16*>(p);
  ConvertToBf16(ctx, src, n, dst);
  return dst;
}

// The elements a strided batch of (rows x cols, ld) operands reaches.
long long Span(int rows, int cols, int ld, long long stride, int count) {
  return static_cast<long long>(count - 1) * stride + static_cast<long long>(rows - 1) * ld + cols;
}

// The compute type of fp32 and TF32 products (BF16 inputs accumulate in fp32).
cublasComputeType_t ComputeType(Precision p) {
  return p == Precision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

}  // namespace

void GemmStridedBatched(const Context& ctx, bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
                        int lda, long long stride_a, const float* b, int ldb, long long stride_b, float beta,
                        float* c, int ldc, long long stride_c, int count) {
  if (m == 0 || n == 0 || count == 0) return;
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasHandle_t blas = ctx.blas->Bind(ctx.stream);
  if (ctx.precision != Precision::kBf16) {
    TP_CUDA(cublasGemmStridedBatchedEx(blas, op_b, op_a, n, m, k, &alpha, b, CUDA_R_32F, ldb, stride_b, a,
                                       CUDA_R_32F, lda, stride_a, &beta, c, CUDA_R_32F, ldc, stride_c, count,
                                       ComputeType(ctx.precision), CUBLAS_GEMM_DEFAULT));
    return;
  }
  __nv_bfloat16* a16 = Bf16Span(ctx, a, Span(ta ? k : m, ta ? m : k, lda, stride_a, count));
  __nv_bfloat16* b16 = Bf16Span(ctx, b, Span(tb ? n : k, tb ? k : n, ldb, stride_b, count));
  TP_CUDA(cublasGemmStridedBatchedEx(blas, op_b, op_a, n, m, k, &alpha, b16, CUDA_R_16BF, ldb, stride_b, a16,
                                     CUDA_R_16BF, lda, stride_a, &beta, c, CUDA_R_32F, ldc, stride_c, count,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  TP_CUDA(cudaFreeAsync(a16, ctx.stream));
  TP_CUDA(cudaFreeAsync(b16, ctx.stream));
}

// One product through cublasGemmEx, not as a batch of one: on an H100 the
// batched call ran Linear at d 4096 in BF16 at 185 TFLOP/s, this one at 209
// to 241 over three runs.
void Gemm(const Context& ctx, bool ta, bool tb, int m, int n, int k, float alpha, const __nv_bfloat16* a, int lda,
          const __nv_bfloat16* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  TP_CUDA(cublasGemmEx(ctx.blas->Bind(ctx.stream), op_b, op_a, n, m, k, &alpha, b, CUDA_R_16BF, ldb, a, CUDA_R_16BF,
                       lda, &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void Gemm(const Context& ctx, bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  if (ctx.precision != Precision::kBf16) {
    const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    TP_CUDA(cublasGemmEx(ctx.blas->Bind(ctx.stream), op_b, op_a, n, m, k, &alpha, b, CUDA_R_32F, ldb, a, CUDA_R_32F,
                         lda, &beta, c, CUDA_R_32F, ldc, ComputeType(ctx.precision), CUBLAS_GEMM_DEFAULT));
    return;
  }
  __nv_bfloat16* a16 = Bf16Span(ctx, a, Span(ta ? k : m, ta ? m : k, lda, 0, 1));
  __nv_bfloat16* b16 = Bf16Span(ctx, b, Span(tb ? n : k, tb ? k : n, ldb, 0, 1));
  Gemm(ctx, ta, tb, m, n, k, alpha, a16, lda, b16, ldb, beta, c, ldc);
  TP_CUDA(cudaFreeAsync(a16, ctx.stream));
  TP_CUDA(cudaFreeAsync(b16, ctx.stream));
}

}  // namespace twinpipe::execute::cuda
