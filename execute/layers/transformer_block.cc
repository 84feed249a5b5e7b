#include "execute/layers/transformer_block.h"

#include "execute/layers/attention.h"
#include "execute/layers/gelu.h"
#include "execute/layers/layernorm.h"
#include "execute/layers/linear.h"
#include "execute/layers/rmsnorm.h"
#include "execute/layers/squared_relu.h"
#include "execute/layers/swiglu.h"

namespace twinpipe::execute {
namespace {

constexpr size_t kFirstMlp = 2;  // inner_[0..1]: the attention branch; [2..5]: the MLP branch

void AddInto(Tensor& a, const Tensor& b) {
  const size_t n = static_cast<size_t>(a.rows()) * a.cols();
  for (size_t i = 0; i < n; ++i) a.data()[i] += b.data()[i];
}

}  // namespace

TransformerBlock::TransformerBlock(uint64_t seed, int d, int ffn, int heads, int seq, bool causal)
    : TransformerBlock(seed, cost::TransformerSpec{.d_model = d, .ffn = ffn, .heads = heads, .seq = seq,
                                                   .causal = causal}) {}

TransformerBlock::TransformerBlock(uint64_t seed, const cost::TransformerSpec& t) {
  const int d = t.d_model, f = t.ffn;
  auto norm = [&]() -> std::unique_ptr<Layer> {
    if (t.norm == cost::NormKind::kRmsNorm) return std::make_unique<RmsNorm>(d);
    return std::make_unique<LayerNorm>(d);
  };
  inner_.push_back(norm());
  inner_.push_back(std::make_unique<SelfAttention>(
      seed * 4 + 1, AttentionShape{.d = d, .heads = t.heads, .kv_heads = t.kv_heads, .seq = t.seq, .causal = t.causal,
                                   .rope = t.position == cost::PositionKind::kRope, .bias = t.bias}));
  inner_.push_back(norm());
  const bool swiglu = t.mlp == cost::MlpKind::kSwiglu;
  inner_.push_back(std::make_unique<Linear>(seed * 4 + 2, d, swiglu ? 2 * f : f, t.bias));
  switch (t.mlp) {
    case cost::MlpKind::kGelu: inner_.push_back(std::make_unique<Gelu>()); break;
    case cost::MlpKind::kSwiglu: inner_.push_back(std::make_unique<Swiglu>()); break;
    case cost::MlpKind::kSquaredRelu: inner_.push_back(std::make_unique<SquaredRelu>()); break;
  }
  inner_.push_back(std::make_unique<Linear>(seed * 4 + 3, f, d, t.bias));
}

std::vector<Param*> TransformerBlock::Params() {
  std::vector<Param*> all;
  for (auto& l : inner_) {
    for (Param* p : l->Params()) all.push_back(p);
  }
  return all;
}

Tensor TransformerBlock::Forward(const Tensor& x, Saved& saved, Mode mode) {
  saved.inner.resize(inner_.size());
  Tensor h = inner_[1]->Forward(inner_[0]->Forward(x, saved.inner[0], mode), saved.inner[1], mode);
  AddInto(h, x);
  Tensor m = inner_[kFirstMlp]->Forward(h, saved.inner[kFirstMlp], mode);
  for (size_t i = kFirstMlp + 1; i < inner_.size(); ++i) m = inner_[i]->Forward(m, saved.inner[i], mode);
  AddInto(m, h);
  if (mode == Mode::kEval) saved.inner.clear();
  return m;
}

template <typename Step>
Tensor TransformerBlock::BackThrough(const Tensor& dy, Step step) {
  Tensor g = step(inner_.size() - 1, dy);  // the MLP branch, last layer first
  for (size_t i = inner_.size() - 1; i-- > kFirstMlp;) g = step(i, g);
  AddInto(g, dy);                          // dL/dh: both of h's uses
  Tensor a = step(0, step(1, g));          // the attention branch
  AddInto(a, g);
  return a;
}

Tensor TransformerBlock::Backward(const Tensor& dy, const Saved& saved) {
  return BackThrough(dy, [&](size_t i, const Tensor& g) { return inner_[i]->Backward(g, saved.inner[i]); });
}

Tensor TransformerBlock::BackwardInput(const Tensor& dy, Saved& saved) {
  return BackThrough(dy, [&](size_t i, const Tensor& g) { return inner_[i]->BackwardInput(g, saved.inner[i]); });
}

void TransformerBlock::BackwardWeight(Saved& saved) {
  for (size_t i = 0; i < inner_.size(); ++i) inner_[i]->BackwardWeight(saved.inner[i]);
}

}  // namespace twinpipe::execute
