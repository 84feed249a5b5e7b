// fp32 GEMM through OpenBLAS: C (m x n) = alpha op(A) op(B) + beta C,
// row-major, op = transpose when asked. Every call adds 2 m n k to a
// per-thread FLOP count, so tests can hold what a layer computes against
// the cost model's FLOPs.
//
//   Gemm(false, true, B, out, in, 1.f, x, W, 0.f, y);   // y (B,out) = x (B,in) W^T
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace twinpipe::execute {

void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
          float* c);

// The same with explicit row strides (leading dimensions), for sub-matrices
// such as one attention head's columns.
void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc);

// FLOPs of this thread's GEMMs since the last reset.
int64_t GemmFlops();
void ResetGemmFlops();

// Keeps OpenBLAS to one thread while it lives (each device worker is one
// thread already), and gives back the count it found (a Python process's
// numpy may share the library).
class OneBlasThread {
 public:
  OneBlasThread();
  ~OneBlasThread();
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  int before_;
};

// OpenBLAS picks its kernels when it loads, by the CPU's model; on a virtual
// CPU whose model it does not know it falls back to generic SSE ones that
// run the CPU executor's GEMMs several times slower (bench/execute_benchmark's
// transformer step pinned to one core on a 2-core VM: 1.0 to 1.4 s with
// Prescott's kernels, 0.66 to 0.71 s with Haswell's, 0.27 to 0.28 s with
// SkylakeX's). BetterBlasCore says which core OpenBLAS should have taken:
// "SkylakeX" with AVX-512F, "Haswell" with AVX2, where it took one from
// before AVX2; empty where its choice is fine. BlasCoreNote is the note the
// executor prints then (naming OPENBLAS_CORETYPE, which chooses at load),
// empty otherwise.
std::string BetterBlasCore(std::string_view core, bool avx2, bool avx512f);
std::string BlasCoreNote();

}  // namespace twinpipe::execute
