#include "execute/layers/residual_block.h"

#include "execute/layers/gelu.h"
#include "execute/layers/relu.h"
#include "execute/layers/linear.h"
#include "execute/layers/batchnorm.h"
#include "execute/layers/layernorm.h"

namespace twinpipe::execute {

ResidualBlock::ResidualBlock(std::string name, std::vector<std::unique_ptr<Layer>> inner, bool residual)
    : name_(std::move(name)), residual_(residual), inner_(std::move(inner)) {}

ResidualBlock::ResidualBlock(uint64_t seed, int width, cost::Norm norm, bool residual)
    : name_(residual ? "residual_block" : "block"), residual_(residual) {
  if (norm == cost::Norm::kLayerNorm) inner_.push_back(std::make_unique<LayerNorm>(width));
  if (norm == cost::Norm::kBatchNorm) inner_.push_back(std::make_unique<BatchNorm>(width));
  inner_.push_back(std::make_unique<Linear>(seed, width, width));
  inner_.push_back(std::make_unique<Relu>());
}

Tensor ResidualBlock::Forward(const Tensor& x, Saved& saved, Mode mode) {
  saved.inner.resize(inner_.size());
  Tensor h = inner_[0]->Forward(x, saved.inner[0], mode);
  for (size_t i = 1; i < inner_.size(); ++i) h = inner_[i]->Forward(h, saved.inner[i], mode);
  if (residual_) {
    const size_t n = static_cast<size_t>(h.rows()) * h.cols();
    for (size_t i = 0; i < n; ++i) h.data()[i] += x.data()[i];
  }
  if (mode == Mode::kEval) saved.inner.clear();
  return h;
}

// Back through the inner layers, last first, with `step(i, g)`; then the skip.
template <typename Step>
Tensor ResidualBlock::BackThrough(const Tensor& dy, Step step) {
  Tensor g = step(inner_.size() - 1, dy);
  for (size_t i = inner_.size() - 1; i-- > 0;) g = step(i, g);
  if (residual_) {
    const size_t n = static_cast<size_t>(g.rows()) * g.cols();
    for (size_t i = 0; i < n; ++i) g.data()[i] += dy.data()[i];
  }
  return g;
}

Tensor ResidualBlock::Backward(const Tensor& dy, const Saved& saved) {
  return BackThrough(dy, [&](size_t i, const Tensor& g) { return inner_[i]->Backward(g, saved.inner[i]); });
}

Tensor ResidualBlock::BackwardInput(const Tensor& dy, Saved& saved) {
  return BackThrough(dy, [&](size_t i, const Tensor& g) { return inner_[i]->BackwardInput(g, saved.inner[i]); });
}

void ResidualBlock::BackwardWeight(Saved& saved) {
  for (size_t i = 0; i < inner_.size(); ++i) inner_[i]->BackwardWeight(saved.inner[i]);
}

std::vector<Param*> ResidualBlock::Params() {
  std::vector<Param*> all;
  for (auto& l : inner_) {
    for (Param* p : l->Params()) all.push_back(p);
  }
  return all;
}

void ResidualBlock::EndStep() {
  for (auto& l : inner_) l->EndStep();
}

}  // namespace twinpipe::execute
