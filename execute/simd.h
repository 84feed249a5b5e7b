// Elementwise loops compiled twice: for AVX2 and for any x86-64 (SSE), the
// one the CPU runs chosen when the program loads (GCC's and Clang's
// target_clones). No FMA in either, so both round alike, and alike to the
// scalar code. Not under the sanitizers, whose runtimes do not take them.
//
//   TWINPIPE_SIMD_CLONES void Scale(const float* __restrict x, float* __restrict y, size_t n);
#pragma once

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TWINPIPE_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TWINPIPE_SIMD_CLONES
#endif
