// Token and position embedding: token ids (B, S), stored as floats, to
// (B*S, d) rows: token_table[id] + position_table[t]; without learned
// positions (rotary ones are the attention's), token_table[id] alone. Token
// ids have no gradient; the tables' gradients are a scatter-add, which the
// zero-bubble split leaves to W.
//
//   Embedding e(seed, /*vocab=*/1000, /*seq=*/128, /*d=*/256);
//   Embedding tokens_only(seed, 1000, 128, 256, /*positions=*/false);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class Embedding : public WeightedLayer {
 public:
  Embedding(uint64_t seed, int vocab, int seq, int d, bool positions = true);
  // The (vocab, d) token table of the embedding seeded `seed`, uniform in
  // +-bound (1; tied, TiedBound): the head's tied copy draws it here too.
  static std::vector<float> TokenTable(uint64_t seed, int vocab, int d, float bound);
  std::string_view Name() const override { return "embedding"; }
  Tensor Forward(const Tensor& ids, Saved& saved, Mode mode) override;  // saves the ids; no input gradient
  std::vector<Param*> Params() override {
    if (positions_) return {&token_, &position_};
    return {&token_};
  }
  int vocab() const { return vocab_; }
  int seq() const { return seq_; }
  int d() const { return d_; }
  bool positions() const { return positions_; }
  // The logits reuse the token table (Tie::kOriginal), drawn with bound
  // 1/sqrt(d) as the logits' weights are.
  void TieTokens();
  static float TiedBound(int d);

 protected:
  Tensor InputGradient(const Tensor& dy) const override;
  void AddWeightGradients(const Tensor& dy, const Tensor& x) override;

 private:
  uint64_t seed_;
  int vocab_, seq_, d_;
  bool positions_;
  Param token_, position_;
};

}  // namespace twinpipe::execute
