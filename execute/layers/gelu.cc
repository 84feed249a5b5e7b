#include "execute/layers/gelu.h"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "execute/simd.h"

namespace twinpipe::execute {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// tanh(u) = sign(u) (1 - e) / (1 + e), e = exp(-2|u|), with exp as 2^k p(r):
// k = round(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2] (ln 2 split in two
// for exactness), p the Taylor polynomial to r^7 (error < 2e-8 relative),
// 2^k built in the exponent bits: plain arithmetic, no libm call (libm's
// tanhf took a fifth of a CPU training step). Branch-free (the clamp and the
// sign are integer operations on the bits), so that the compiler vectorises
// the loops that call it. Within float rounding of std::tanh (checked in the
// layer tests).
inline float Tanh(float u) {
  const auto bits = std::bit_cast<uint32_t>(u);
  // |u| clamped to 43 (exp(-86) ~ 4e-38: still normal; tanh is 1 in float):
  // non-negative floats order as their bits do.
  const float a = std::bit_cast<float>(std::min(bits & 0x7fffffffu, std::bit_cast<uint32_t>(43.f)));
  const float x = -2.f * a;
  constexpr float kLog2e = 1.4426950408889634f, kLn2Hi = 0.693145751953125f, kLn2Lo = 1.428606765330187e-06f;
  constexpr float kRound = 12582912.f;  // 1.5 x 2^23: adding and subtracting it rounds to an integer
  const float kf = (x * kLog2e + kRound) - kRound;
  const float r = (x - kf * kLn2Hi) - kf * kLn2Lo;
  float p = 1.f / 5040;
  p = p * r + 1.f / 720;
  p = p * r + 1.f / 120;
  p = p * r + 1.f / 24;
  p = p * r + 1.f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const float e = p * std::bit_cast<float>((static_cast<int32_t>(kf) + 127) << 23);
  const float t = (1.f - e) / (1.f + e);  // >= 0: u's sign goes on as a bit
  return std::bit_cast<float>(std::bit_cast<uint32_t>(t) | (bits & 0x80000000u));
}
// The loops, compiled for AVX2 (eight lanes) and for any x86-64 (SSE, four).

TWINPIPE_SIMD_CLONES void GeluForward(const float* __restrict xs, float* __restrict ys, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = xs[i];
    ys[i] = 0.5f * v * (1.f + Tanh(kSqrt2OverPi * (v + kCubic * v * v * v)));
  }
}

TWINPIPE_SIMD_CLONES void GeluBackward(const float* __restrict xs, const float* __restrict dys, float* __restrict dxs,
                                       size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = xs[i];
    const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
    const float t = Tanh(u);
    const float du = kSqrt2OverPi * (1.f + 3.f * kCubic * v * v);
    dxs[i] = dys[i] * (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du);
  }
}
}  // namespace

Tensor Gelu::Forward(const Tensor& x, Saved& saved, Mode mode) {
  auto y = Tensor::Uninitialized(x.account(), x.rows(), x.cols());
  GeluForward(x.data(), y.data(), static_cast<size_t>(x.rows()) * x.cols());
  if (mode != Mode::kEval) {
    saved.t.clear();
    saved.t.push_back(x);
  }
  return y;
}

Tensor Gelu::Backward(const Tensor& dy, const Saved& saved) {
  const Tensor& x = saved.t.at(0);
  auto dx = Tensor::Uninitialized(dy.account(), dy.rows(), dy.cols());
  GeluBackward(x.data(), dy.data(), dx.data(), static_cast<size_t>(dy.rows()) * dy.cols());
  return dx;
}

}  // namespace twinpipe::execute
