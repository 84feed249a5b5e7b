#include "execute/cuda/layers/attention.h"

#include <cmath>

#include "execute/cuda/check.h"
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

// Rotary positions (execute/layers/rotary.h): over rows x heads x dh/2
// pairs, columns first + h dh + i and + dh/2 of a row (ld wide) turn by the
// angle of position row mod seq; inverse turns back.
__global__ void RotaryTurn(float* x, int ld, int first, int heads, int dh, int seq, const float* cosines,
                           const float* sines, bool inverse, long long n) {
  const int half = dh / 2;
  TP_GRID_STRIDE(k, n) {
    const long long row = k / (static_cast<long long>(heads) * half);
    const int rest = static_cast<int>(k % (static_cast<long long>(heads) * half)), h = rest / half, i = rest % half;
    const long long at = static_cast<long long>(row % seq) * half + i;
    const float c = cosines[at], s = inverse ? -sines[at] : sines[at];
    float* a = x + row * ld + first + h * dh + i;
    float* b = a + half;
    const float ai = *a, bi = *b;
    *a = ai * c - bi * s;
    *b = bi * c + ai * s;
  }
}

std::vector<Param*> Split(const std::vector<Param*>& all, bool second) {
  const size_t per = all.size() / 2;  // weight and bias, or the weight alone
  return {all.begin() + (second ? per : 0), all.begin() + (second ? 2 * per : per)};
}

DeviceBuffer Table(const std::vector<float>& host) {
  DeviceBuffer b(static_cast<int64_t>(host.size()));
  TP_CUDA(cudaMemcpy(b.get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  return b;
}

}  // namespace

SelfAttention::SelfAttention(const AttentionShape& shape, const Rotary* rotary, const std::vector<Param*>& init)
    : shape_(shape), rope_(rotary != nullptr),
      qkv_(shape.d, shape.d + 2 * shape.kv() * shape.head_dim(), Split(init, false)),
      out_(shape.d, shape.d, Split(init, true)) {
  if (rotary) {
    cos_ = Table(rotary->cos());
    sin_ = Table(rotary->sin());
  }
}

std::vector<DeviceParam*> SelfAttention::Params() {
  std::vector<DeviceParam*> all = qkv_.Params();
  for (DeviceParam* p : out_.Params()) all.push_back(p);
  return all;
}

void SelfAttention::Rotate(const Context& ctx, DeviceTensor& t, bool inverse) const {
  const int dh = shape_.head_dim(), ld = t.cols();
  const struct { int first, heads; } parts[] = {{0, shape_.heads}, {shape_.d, shape_.kv()}};  // Q, K
  for (const auto& part : parts) {
    const long long n = static_cast<long long>(t.rows()) * part.heads * (dh / 2);
    if (n == 0) continue;
    RotaryTurn<<<Blocks(n), kThreads, 0, ctx.stream>>>(t.data(), ld, part.first, part.heads, dh, shape_.seq,
                                                       cos_.get(), sin_.get(), inverse, n);
    Launched("rotary positions");
  }
}

DeviceTensor SelfAttention::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  const int S = shape_.seq, B = x.rows() / S, H = shape_.heads, G = shape_.kv(), dh = shape_.head_dim();
  const int d = shape_.d, kv = G * dh, ld = d + 2 * kv, group = H / G;
  const float scale = 1.f / std::sqrt(static_cast<float>(dh));
  saved.inner.resize(2);
  DeviceTensor qkv = qkv_.Forward(ctx, x, saved.inner[0], mode);
  if (rope_) Rotate(ctx, qkv, false);
  DeviceTensor probs = ctx.Alloc(B * H * S, S), attn = ctx.Alloc(B * S, d);
  // Per sample and member i of a group, a batched product over the G K/V
  // heads: query head g group + i reads columns (g group + i) dh of Q and
  // K/V head g's columns d + g dh (K) and d + kv + g dh (V).
  const long long SS = static_cast<long long>(S) * S;
  for (int b = 0; b < B; ++b) {
    const float* base = qkv.data() + static_cast<int64_t>(b) * S * ld;
    for (int i = 0; i < group; ++i) {
      GemmStridedBatched(ctx, false, true, S, S, dh, scale, base + i * dh, ld, group * dh, base + d, ld, dh, 0.f,
                         probs.data() + (static_cast<int64_t>(b) * H + i) * SS, S, group * SS, G);  // Q K^T
    }
  }
  if (probs.rows() > 0) {
    SoftmaxRows<<<probs.rows(), kThreads, 0, ctx.stream>>>(probs.data(), S, shape_.causal);
    Launched("attention softmax");
  }
  for (int b = 0; b < B; ++b) {
    const float* v = qkv.data() + static_cast<int64_t>(b) * S * ld + d + kv;
    for (int i = 0; i < group; ++i) {
      GemmStridedBatched(ctx, false, false, S, dh, S, 1.f, probs.data() + (static_cast<int64_t>(b) * H + i) * SS, S,
                         group * SS, v, ld, dh, 0.f, attn.data() + static_cast<int64_t>(b) * S * d + i * dh, d,
                         group * dh, G);  // P V
    }
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
  const int S = shape_.seq, B = qkv.rows() / S, H = shape_.heads, G = shape_.kv(), dh = shape_.head_dim();
  const int d = shape_.d, kv = G * dh, ld = d + 2 * kv, group = H / G;
  const float scale = 1.f / std::sqrt(static_cast<float>(dh));
  DeviceTensor dqkv = ctx.Alloc(B * S, ld), dp = ctx.Alloc(B * H * S, S);
  const long long SS = static_cast<long long>(S) * S;
  for (int b = 0; b < B; ++b) {
    const float* base = qkv.data() + static_cast<int64_t>(b) * S * ld;
    const float* dout = d_attn.data() + static_cast<int64_t>(b) * S * d;
    float* dbase = dqkv.data() + static_cast<int64_t>(b) * S * ld;
    for (int i = 0; i < group; ++i) {
      const float* p = probs.data() + (static_cast<int64_t>(b) * H + i) * SS;
      float* g = dp.data() + (static_cast<int64_t>(b) * H + i) * SS;
      GemmStridedBatched(ctx, false, true, S, S, dh, 1.f, dout + i * dh, d, group * dh, base + d + kv, ld, dh, 0.f, g,
                         S, group * SS, G);  // dP = dO V^T
      GemmStridedBatched(ctx, true, false, S, dh, S, 1.f, p, S, group * SS, dout + i * dh, d, group * dh,
                         i == 0 ? 0.f : 1.f, dbase + d + kv, ld, dh, G);  // dV (+)= P^T dO
    }
  }
  if (dp.rows() > 0) {
    SoftmaxBackwardRows<<<dp.rows(), kThreads, 0, ctx.stream>>>(probs.data(), dp.data(), S);
    Launched("attention softmax backward");
  }
  for (int b = 0; b < B; ++b) {
    const float* base = qkv.data() + static_cast<int64_t>(b) * S * ld;
    float* dbase = dqkv.data() + static_cast<int64_t>(b) * S * ld;
    for (int i = 0; i < group; ++i) {
      const float* g = dp.data() + (static_cast<int64_t>(b) * H + i) * SS;
      GemmStridedBatched(ctx, false, false, S, dh, S, scale, g, S, group * SS, base + d, ld, dh, 0.f, dbase + i * dh,
                         ld, group * dh, G);  // dQ = dS K
      GemmStridedBatched(ctx, true, false, S, dh, S, scale, g, S, group * SS, base + i * dh, ld, group * dh,
                         i == 0 ? 0.f : 1.f, dbase + d, ld, dh, G);  // dK (+)= dS^T Q
    }
  }
  if (rope_) Rotate(ctx, dqkv, true);  // the gradients of the unturned Q and K
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
