#include "execute/cuda/layers/embedding.h"

#include "execute/cuda/kernels.cuh"

namespace twinpipe::execute::cuda {
namespace {

// Token ids outside the vocabulary read row 0 (the CPU layer refuses them;
// the synthetic tasks never make one).
__device__ inline long long TokenRow(float id, int vocab) {
  const int i = static_cast<int>(id);
  return i >= 0 && i < vocab ? i : 0;
}

// position and dposition are null without a position table.
__global__ void EmbeddingForward(const float* ids, const float* token, const float* position, int seq, int d,
                                 int vocab, float* y, long long n) {
  TP_GRID_STRIDE(i, n) {
    const long long row = i / d, c = i % d;
    const float t = token[TokenRow(ids[row], vocab) * d + c];
    y[i] = position ? t + position[(row % seq) * d + c] : t;
  }
}

__global__ void EmbeddingBackward(const float* ids, const float* dy, int seq, int d, int vocab, float* dtoken,
                                  float* dposition, long long n) {
  TP_GRID_STRIDE(i, n) {
    const long long row = i / d, c = i % d;
    atomicAdd(&dtoken[TokenRow(ids[row], vocab) * d + c], dy[i]);
    if (dposition) atomicAdd(&dposition[(row % seq) * d + c], dy[i]);
  }
}

}  // namespace

Embedding::Embedding(int vocab, int seq, int d, const std::vector<Param*>& init)
    : vocab_(vocab), seq_(seq), d_(d), positions_(init.size() > 1), token_(Upload(*init.at(0))) {
  if (positions_) position_ = Upload(*init[1]);
}

DeviceTensor Embedding::Forward(const Context& ctx, const DeviceTensor& ids, Saved& saved, Mode mode) {
  if (ids.cols() != seq_) throw CudaError("embedding: the input does not hold seq tokens per row");
  DeviceTensor y = ctx.Alloc(ids.rows() * seq_, d_);
  const float* position = positions_ ? position_.value.get() : nullptr;
  EmbeddingForward<<<Blocks(y.size()), kThreads, 0, ctx.stream>>>(ids.data(), token_.value.get(), position, seq_, d_,
                                                                  vocab_, y.data(), y.size());
  Launched("embedding forward");
  if (mode != Mode::kEval) saved.t = {ids};
  return y;
}

DeviceTensor Embedding::InputGradient(const Context& /*ctx*/, const DeviceTensor& /*dy*/) { return DeviceTensor(); }

void Embedding::AddWeightGradients(const Context& ctx, const DeviceTensor& dy, const DeviceTensor& ids) {
  float* dposition = positions_ ? position_.grad.get() : nullptr;
  EmbeddingBackward<<<Blocks(dy.size()), kThreads, 0, ctx.stream>>>(ids.data(), dy.data(), seq_, d_, vocab_,
                                                                    token_.grad.get(), dposition, dy.size());
  Launched("embedding backward");
}

}  // namespace twinpipe::execute::cuda
