#include "execute/layers/embedding.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace twinpipe::execute {

Embedding::Embedding(uint64_t seed, int vocab, int seq, int d, bool positions)
    : seed_(seed), vocab_(vocab), seq_(seq), d_(d), positions_(positions) {
  token_ = Param{"token", TokenTable(seed, vocab, d, 1.f), {}, {}, {}};
  token_.grad.assign(token_.value.size(), 0.0);
  if (positions) {
    position_ = Param{"position", InitUniform(seed * 2 + 2, static_cast<size_t>(seq) * d, 0.1f), {}, {}, {}};
    position_.grad.assign(position_.value.size(), 0.0);
  }
}

std::vector<float> Embedding::TokenTable(uint64_t seed, int vocab, int d, float bound) {
  return InitUniform(seed * 2 + 1, static_cast<size_t>(vocab) * d, bound);
}

float Embedding::TiedBound(int d) { return 1.f / std::sqrt(static_cast<float>(d)); }

void Embedding::TieTokens() {
  token_.value = TokenTable(seed_, vocab_, d_, TiedBound(d_));
  token_.tie = Tie::kOriginal;
}

Tensor Embedding::Forward(const Tensor& ids, Saved& saved, Mode mode) {
  if (ids.cols() != seq_) throw std::invalid_argument(fmt::format("embedding: {} tokens per row, expected {}", ids.cols(), seq_));
  const int B = ids.rows();
  Tensor y(ids.account(), B * seq_, d_);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < seq_; ++t) {
      const int id = static_cast<int>(ids.at(b, t));
      if (id < 0 || id >= vocab_) throw std::out_of_range(fmt::format("embedding: token {} outside the vocabulary", id));
      float* row = y.ptr(b * seq_ + t, 0);
      const float* token = &token_.value[static_cast<size_t>(id) * d_];
      if (positions_) {
        const float* position = &position_.value[static_cast<size_t>(t) * d_];
        for (int c = 0; c < d_; ++c) row[c] = token[c] + position[c];
      } else {
        std::copy_n(token, d_, row);
      }
    }
  }
  if (mode != Mode::kEval) {
    saved.t.clear();
    saved.t.push_back(ids);
  }
  return y;
}

Tensor Embedding::InputGradient(const Tensor& /*dy*/) const { return Tensor(); }  // token ids have none

void Embedding::AddWeightGradients(const Tensor& dy, const Tensor& ids) {
  for (int b = 0; b < ids.rows(); ++b) {
    for (int t = 0; t < seq_; ++t) {
      const auto id = static_cast<size_t>(ids.at(b, t));
      const float* g = dy.ptr(b * seq_ + t, 0);
      for (int c = 0; c < d_; ++c) token_.grad[id * d_ + c] += g[c];
      if (!positions_) continue;
      for (int c = 0; c < d_; ++c) position_.grad[static_cast<size_t>(t) * d_ + c] += g[c];
    }
  }
}

}  // namespace twinpipe::execute
