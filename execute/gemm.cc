#include "execute/gemm.h"

#include <algorithm>
#include <array>
#include <cctype>

#include <cblas.h>
#include <fmt/format.h>

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

std::string BetterBlasCore(std::string_view core, bool avx2, bool avx512f) {
  // OpenBLAS's x86 cores without AVX2 kernels (its DYNAMIC_ARCH names).
  static constexpr std::array<std::string_view, 18> kBeforeAvx2{
      "prescott", "core2",     "penryn",   "dunnington", "nehalem",  "sandybridge", "atom",  "katmai", "coppermine",
      "northwood", "banias",   "opteron",  "opteron_sse3", "barcelona", "bobcat",   "bulldozer", "piledriver",
      "steamroller"};
  std::string lower(core);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (std::find(kBeforeAvx2.begin(), kBeforeAvx2.end(), lower) == kBeforeAvx2.end()) return "";
  return avx512f ? "SkylakeX" : avx2 ? "Haswell" : "";
}

std::string BlasCoreNote() {
#if defined(__x86_64__) || defined(__i386__)
  const char* name = openblas_get_corename();
  const std::string core = name ? name : "";
  const std::string better =
      BetterBlasCore(core, __builtin_cpu_supports("avx2"), __builtin_cpu_supports("avx512f"));
  if (better.empty()) return "";
  return fmt::format("OpenBLAS took its {} kernels on this CPU, which has {} (a virtual CPU whose model it does not "
                     "know): the cpu backend's GEMMs run 2 to 3 times slower than they could; set "
                     "OPENBLAS_CORETYPE={} to choose its kernels",
                     core, better == "SkylakeX" ? "AVX-512" : "AVX2", better);
#else
  return "";
#endif
}

}  // namespace twinpipe::execute
