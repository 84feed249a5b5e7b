#include "execute/gemm.h"

#include <cblas.h>

namespace twinpipe::execute {

void Gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              ta ? m : k, b, tb ? k : n, beta, c, n);
}

void UseOneBlasThread() { openblas_set_num_threads(1); }

}  // namespace twinpipe::execute
