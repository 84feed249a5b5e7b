// Token and position embedding: token ids (B, S), stored as floats, to
// (B*S, d) rows: token_table[id] + position_table[t]. Token ids have no
// gradient; the tables' gradients are a scatter-add, which the zero-bubble
// split leaves to W.
//
//   Embedding e(seed, /*vocab=*/1000, /*seq=*/128, /*d=*/256);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class Embedding : public WeightedLayer {
 public:
  Embedding(uint64_t seed, int vocab, int seq, int d);
  std::string_view Name() const override { return "embedding"; }
  Tensor Forward(const Tensor& ids, Saved& saved, Mode mode) override;  // saves the ids; no input gradient
  std::vector<Param*> Params() override { return {&token_, &position_}; }
  int vocab() const { return vocab_; }
  int seq() const { return seq_; }
  int d() const { return d_; }

 protected:
  Tensor InputGradient(const Tensor& dy) const override;
  void AddWeightGradients(const Tensor& dy, const Tensor& x) override;

 private:
  int vocab_, seq_, d_;
  Param token_, position_;
};

}  // namespace twinpipe::execute
