// Layers applied one after the other, as one layer (the `mlp` generator's
// input layer is Linear then ReLU).
//
//   Sequential s;  s.Add(std::make_unique<Linear>(1, 32, 64));  s.Add(std::make_unique<Relu>());
#pragma once

#include <memory>
#include <vector>

#include "execute/layers/layer.h"

namespace twinpipe::execute {

class Sequential : public Layer {
 public:
  void Add(std::unique_ptr<Layer> layer) { inner_.push_back(std::move(layer)); }
  std::string_view Name() const override { return "sequential"; }
  Tensor Forward(const Tensor& x, Saved& saved, Mode mode) override {
    saved.inner.resize(inner_.size());
    Tensor h = inner_[0]->Forward(x, saved.inner[0], mode);
    for (size_t i = 1; i < inner_.size(); ++i) h = inner_[i]->Forward(h, saved.inner[i], mode);
    return h;
  }
  Tensor Backward(const Tensor& dy, const Saved& saved) override {
    Tensor g = inner_.back()->Backward(dy, saved.inner.back());
    for (size_t i = inner_.size() - 1; i-- > 0;) g = inner_[i]->Backward(g, saved.inner[i]);
    return g;
  }
  Tensor BackwardInput(const Tensor& dy, Saved& saved) override {
    Tensor g = inner_.back()->BackwardInput(dy, saved.inner.back());
    for (size_t i = inner_.size() - 1; i-- > 0;) g = inner_[i]->BackwardInput(g, saved.inner[i]);
    return g;
  }
  void BackwardWeight(Saved& saved) override {
    for (size_t i = 0; i < inner_.size(); ++i) inner_[i]->BackwardWeight(saved.inner[i]);
  }
  std::vector<Param*> Params() override {
    std::vector<Param*> all;
    for (auto& l : inner_) {
      for (Param* p : l->Params()) all.push_back(p);
    }
    return all;
  }
  void EndStep() override {
    for (auto& l : inner_) l->EndStep();
  }
  void AppendState(std::vector<double>& out) const override {
    for (const auto& l : inner_) l->AppendState(out);
  }
  const std::vector<std::unique_ptr<Layer>>& inner() const { return inner_; }

 private:
  std::vector<std::unique_ptr<Layer>> inner_;
};

}  // namespace twinpipe::execute
