#include "execute/cuda/layers/attention.h"

#include <cmath>

#include "execute/cuda/gemm.h"
#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

// Row i of a (rows, S) block of scores (row i of a head's S x S matrix is
// global row r, i = r mod S) to its softmax over the tokens it may see.
__global__ void SoftmaxRows(float* p, int S, bool causal) {
  const long long r = blockIdx.x;
  const int i = static_cast<int>(r % S), seen = causal ? i + 1 : S;
  float* row = p + r * S;
  double top = -INFINITY;
  for (int j = threadIdx.x; j < seen; j += blockDim.x) top = fmax(top, static_cast<double>(row[j]));
  top = BlockMax(top);
  double z = 0;
  for (int j = threadIdx.x; j < seen; j += blockDim.x) z += exp(static_cast<double>(row[j]) - top);
  z = BlockSum(z);
  for (int j = threadIdx.x; j < S; j += blockDim.x) {
    row[j] = j < seen ? static_cast<float>(exp(static_cast<double>(row[j]) - top) / z) : 0.f;
  }
}

// dScores = P (dP - sum_j P dP), in place over dP, a block per row.
__global__ void SoftmaxBackwardRows(const float* p, float* g, int S) {
  const long long r = blockIdx.x;
  const float* pr = p + r * S;
  float* gr = g + r * S;
  double dot = 0;
  for (int j = threadIdx.x; j < S; j += blockDim.x) dot += static_cast<double>(pr[j]) * gr[j];
  dot = BlockSum(dot);
  for (int j = threadIdx.x; j < S; j += blockDim.x) gr[j] = static_cast<float>(pr[j] * (gr[j] - dot));
}

std::vector<Param*> Split(const std::vector<Param*>& all, size_t first) {
  return {all.at(first), all.at(first + 1)};
}

}  // namespace

SelfAttention::SelfAttention(int d, int heads, int seq, bool causal, const std::vector<Param*>& init)
    : d_(d), heads_(heads), seq_(seq), causal_(causal), qkv_(d, 3 * d, Split(init, 0)), out_(d, d, Split(init, 2)) {}

std::vector<DeviceParam*> SelfAttention::Params() {
  std::vector<DeviceParam*> all = qkv_.Params();
  for (DeviceParam* p : out_.Params()) all.push_back(p);
  return all;
}

DeviceTensor SelfAttention::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  const int S = seq_, B = x.rows() / S, dh = d_ / heads_;
  const float scale = 1.f / std::sqrt(static_cast<float>(dh));
  saved.inner.resize(2);
  DeviceTensor qkv = qkv_.Forward(ctx, x, saved.inner[0], mode);
  DeviceTensor probs = ctx.Alloc(B * heads_ * S, S), attn = ctx.Alloc(B * S, d_);
  const int ld = 3 * d_;
  // A batched product per sample over its heads: head h's Q, K and V are
  // columns [h dh, (h+1) dh) of the sample's rows of qkv.
  const long long SS = static_cast<long long>(S) * S;
  for (int b = 0; b < B; ++b) {
    const float* q = qkv.data() + static_cast<int64_t>(b) * S * ld;
    GemmStridedBatched(ctx, false, true, S, S, dh, scale, q, ld, dh, q + d_, ld, dh, 0.f,
                       probs.data() + b * heads_ * SS, S, SS, heads_);  // Q K^T
  }
  if (probs.rows() > 0) {
    SoftmaxRows<<<probs.rows(), kThreads, 0, ctx.stream>>>(probs.data(), S, causal_);
    Launched("attention softmax");
  }
  for (int b = 0; b < B; ++b) {
    const float* v = qkv.data() + static_cast<int64_t>(b) * S * ld + 2 * d_;
    GemmStridedBatched(ctx, false, false, S, dh, S, 1.f, probs.data() + b * heads_ * SS, S, SS, v, ld, dh, 0.f,
                       attn.data() + static_cast<int64_t>(b) * S * d_, d_, dh, heads_);  // P V
  }
  DeviceTensor y = out_.Forward(ctx, attn, saved.inner[1], mode);
  if (mode != Mode::kEval) {
    saved.t = {qkv, probs};
  } else {
    saved.t.clear();
    saved.inner.clear();
  }
  return y;
}

DeviceTensor SelfAttention::CoreBackward(const Context& ctx, const DeviceTensor& d_attn, const DeviceTensor& qkv,
                                         const DeviceTensor& probs) const {
  const int S = seq_, B = qkv.rows() / S, dh = d_ / heads_, ld = 3 * d_;
  const float scale = 1.f / std::sqrt(static_cast<float>(dh));
  DeviceTensor dqkv = ctx.Alloc(B * S, ld), dp = ctx.Alloc(B * heads_ * S, S);
  const long long SS = static_cast<long long>(S) * S;
  for (int b = 0; b < B; ++b) {
    const float* base = qkv.data() + static_cast<int64_t>(b) * S * ld;
    const float* p = probs.data() + b * heads_ * SS;
    const float* dout = d_attn.data() + static_cast<int64_t>(b) * S * d_;
    float* g = dp.data() + b * heads_ * SS;
    float* dbase = dqkv.data() + static_cast<int64_t>(b) * S * ld;
    GemmStridedBatched(ctx, false, true, S, S, dh, 1.f, dout, d_, dh, base + 2 * d_, ld, dh, 0.f, g, S, SS,
                       heads_);  // dP = dO V^T
    GemmStridedBatched(ctx, true, false, S, dh, S, 1.f, p, S, SS, dout, d_, dh, 0.f, dbase + 2 * d_, ld, dh,
                       heads_);  // dV = P^T dO
  }
  if (dp.rows() > 0) {
    SoftmaxBackwardRows<<<dp.rows(), kThreads, 0, ctx.stream>>>(probs.data(), dp.data(), S);
    Launched("attention softmax backward");
  }
  for (int b = 0; b < B; ++b) {
    const float* base = qkv.data() + static_cast<int64_t>(b) * S * ld;
    const float* g = dp.data() + b * heads_ * SS;
    float* dbase = dqkv.data() + static_cast<int64_t>(b) * S * ld;
    GemmStridedBatched(ctx, false, false, S, dh, S, scale, g, S, SS, base + d_, ld, dh, 0.f, dbase, ld, dh,
                       heads_);  // dQ = dS K
    GemmStridedBatched(ctx, true, false, S, dh, S, scale, g, S, SS, base, ld, dh, 0.f, dbase + d_, ld, dh,
                       heads_);  // dK = dS^T Q
  }
  return dqkv;
}

DeviceTensor SelfAttention::Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) {
  DeviceTensor d_attn = out_.Backward(ctx, dy, saved.inner[1]);
  return qkv_.Backward(ctx, CoreBackward(ctx, d_attn, saved.t.at(0), saved.t.at(1)), saved.inner[0]);
}

DeviceTensor SelfAttention::BackwardInput(const Context& ctx, const DeviceTensor& dy, Saved& saved) {
  DeviceTensor d_attn = out_.BackwardInput(ctx, dy, saved.inner[1]);
  DeviceTensor dqkv = CoreBackward(ctx, d_attn, saved.t.at(0), saved.t.at(1));
  saved.t.clear();
  return qkv_.BackwardInput(ctx, dqkv, saved.inner[0]);
}

void SelfAttention::BackwardWeight(const Context& ctx, Saved& saved) {
  out_.BackwardWeight(ctx, saved.inner[1]);
  qkv_.BackwardWeight(ctx, saved.inner[0]);
}

}  // namespace twinpipe::execute::cuda
