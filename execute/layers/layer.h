// The layer interface of the CPU backend: forward saves what backward needs;
// backward returns the input gradient and adds weight gradients (in double,
// so their sum does not depend on the order micro-batches arrive in).
//
//   Saved saved;  Tensor y = layer.Forward(x, saved, Mode::kTrain);
//   Tensor dx = layer.Backward(dy, saved);
// or, split for zero-bubble schedules (I now, W later):
//   Tensor dx = layer.BackwardInput(dy, saved);  ...  layer.BackwardWeight(saved);
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "execute/tensor.h"

namespace twinpipe::execute {

// Tied weights (a transformer's logits reusing its token embedding): the
// embedding's table is the original, the head keeps a copy of it (as
// Megatron-LM's first and last pipeline stages each do). At STEP both
// gradients become their sum, so both apply the same update and stay equal
// (execute/tied.h). A copy is not counted among the model's parameters.
enum class Tie { kNone, kOriginal, kCopy };

struct Param {
  std::string name;
  std::vector<float> value;
  std::vector<double> grad;          // accumulated over the micro-batches of a step
  std::vector<float> m, v;           // optimizer state (momentum; Adam's second moment)
  std::vector<float> scratch;        // fp32 gradient of one micro-batch, before it is added to `grad`
  Tie tie = Tie::kNone;
};

// kTrain: the first forward of a micro-batch; kRecompute: its rebuild (R),
// which must not update statistics again; kEval: inference.
enum class Mode { kTrain, kRecompute, kEval };

// What a forward keeps for its backward: tensors, and composite layers'
// inner layers' own.
struct Saved {
  std::vector<Tensor> t;
  std::vector<Saved> inner;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string_view Name() const = 0;
  virtual Tensor Forward(const Tensor& x, Saved& saved, Mode mode) = 0;
  virtual Tensor Backward(const Tensor& dy, const Saved& saved) = 0;
  // The I/W split: BackwardInput returns dx and keeps in `saved` what
  // BackwardWeight needs to add the weight gradients later. Layers whose
  // weight gradients are not worth deferring (none, or per-channel vectors)
  // do all their work in BackwardInput. Either way, I then W adds exactly
  // what Backward adds.
  virtual Tensor BackwardInput(const Tensor& dy, Saved& saved) { return Backward(dy, saved); }
  virtual void BackwardWeight(Saved& /*saved*/) {}
  virtual std::vector<Param*> Params() { return {}; }
  // Called once per mini-batch at STEP (batchnorm folds its statistics).
  virtual void EndStep() {}
  // Appends what the layer keeps that is not trained (batchnorm's running
  // mean, then variance), for ExecuteResult::state.
  virtual void AppendState(std::vector<double>& /*out*/) const {}
};

// A layer with weights whose backward splits cleanly: its forward saves only
// its input (saved.t[0]); the input gradient needs only the output gradient,
// the weight gradients the output gradient and the input. Backward, and the
// I/W split (BackwardInput keeps dy for BackwardWeight), follow from the two.
class WeightedLayer : public Layer {
 public:
  Tensor Backward(const Tensor& dy, const Saved& saved) final {
    Tensor dx = InputGradient(dy);
    AddWeightGradients(dy, saved.t.at(0));
    return dx;
  }
  Tensor BackwardInput(const Tensor& dy, Saved& saved) final {
    Tensor dx = InputGradient(dy);
    saved.t.resize(1);
    saved.t.push_back(dy);
    return dx;
  }
  void BackwardWeight(Saved& saved) final {
    AddWeightGradients(saved.t.at(1), saved.t.at(0));
    saved.t.clear();
  }

 protected:
  virtual Tensor InputGradient(const Tensor& dy) const = 0;  // empty when the input has none
  virtual void AddWeightGradients(const Tensor& dy, const Tensor& x) = 0;
};

// A deterministic initial value stream per (seed, layer, parameter).
std::vector<float> InitUniform(uint64_t seed, size_t n, float bound);

}  // namespace twinpipe::execute
