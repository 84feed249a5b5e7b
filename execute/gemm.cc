#include "execute/gemm.h"

#include <cblas.h>

namespace twinpipe::execute {
namespace {
thread_local int64_t flops = 0;
}  // namespace

void Gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
          float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  flops += 2 * int64_t{m} * n * k;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}

void Gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta, float* c) {
  Gemm(ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n);
}

int64_t GemmFlops() { return flops; }
void ResetGemmFlops() { flops = 0; }

OneBlasThread::OneBlasThread() : before_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
OneBlasThread::~OneBlasThread() { openblas_set_num_threads(before_); }

}  // namespace twinpipe::execute
