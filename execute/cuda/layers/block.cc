#include "execute/cuda/layers/block.h"

#include "execute/cuda/elementwise.h"

namespace twinpipe::execute::cuda {

DeviceTensor Block::Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) {
  saved.inner.resize(inner_.size());
  DeviceTensor h = x;
  for (size_t i = 0; i < inner_.size(); ++i) h = inner_[i]->Forward(ctx, h, saved.inner[i], mode);
  if (residual_) h = Add(ctx, h, x);  // a new tensor: saved activations are never written again
  if (mode == Mode::kEval) saved.inner.clear();
  return h;
}

template <typename Step>
DeviceTensor Block::BackThrough(const Context& ctx, const DeviceTensor& dy, Step step) {
  DeviceTensor g = dy;
  for (size_t i = inner_.size(); i-- > 0;) g = step(i, g);
  return residual_ ? Add(ctx, g, dy) : g;
}

DeviceTensor Block::Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) {
  return BackThrough(ctx, dy, [&](size_t i, const DeviceTensor& g) { return inner_[i]->Backward(ctx, g, saved.inner[i]); });
}

DeviceTensor Block::BackwardInput(const Context& ctx, const DeviceTensor& dy, Saved& saved) {
  return BackThrough(ctx, dy,
                     [&](size_t i, const DeviceTensor& g) { return inner_[i]->BackwardInput(ctx, g, saved.inner[i]); });
}

void Block::BackwardWeight(const Context& ctx, Saved& saved) {
  for (size_t i = 0; i < inner_.size(); ++i) inner_[i]->BackwardWeight(ctx, saved.inner[i]);
}

std::vector<DeviceParam*> Block::Params() {
  std::vector<DeviceParam*> all;
  for (auto& l : inner_) {
    for (DeviceParam* p : l->Params()) all.push_back(p);
  }
  return all;
}

void Block::EndStep(const Context& ctx) {
  for (auto& l : inner_) l->EndStep(ctx);
}

}  // namespace twinpipe::execute::cuda
