// The layer interface of the CUDA backend, the CPU backend's (layers/layer.h)
// on the GPU: every call queues kernels on the context's stream and returns
// at once. Weight gradients accumulate in fp32 on the device over the
// micro-batches of a step. Layers are built from their CPU twins (from_cpu.h)
// and start from the very same weights.
//
//   Context ctx{stream, &blas, &account, Precision::kTf32};
//   Saved saved;  DeviceTensor y = layer.Forward(ctx, x, saved, Mode::kTrain);
//   DeviceTensor dx = layer.Backward(ctx, dy, saved);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "execute/cuda/blas.h"
#include "execute/cuda/device_tensor.h"
#include "execute/layers/layer.h"
#include "execute/options.h"

namespace twinpipe::execute::cuda {

using execute::Mode;
using execute::Tie;

using execute::Precision;  // GEMM arithmetic (execute/options.h)

struct Context {
  cudaStream_t stream = nullptr;
  const Blas* blas = nullptr;
  MemoryAccount* account = nullptr;
  Precision precision = Precision::kFp32;
  DeviceTensor Alloc(int rows, int cols) const { return DeviceTensor(account, stream, rows, cols); }
  DeviceTensor AllocBf16(int rows, int cols) const {
    return DeviceTensor(account, stream, rows, cols, Element::kBf16);
  }
};

struct DeviceParam {
  std::string name;
  DeviceBuffer value, grad, m, v;  // v: Adam's second moment
  Tie tie = Tie::kNone;            // the CPU twin's (tied embeddings: layers/layer.h)
  // Counts the writes of `value` after Upload: whatever writes it (the
  // optimizer's Apply) bumps it, so that copies of the value know when they
  // are stale.
  uint64_t version = 0;
  // A GEMM's weight (Linear's) keeps `value` in bf16 for Precision::kBf16:
  // value_bf16 is made at its first use and again whenever `version` has
  // moved past value_bf16_version (ValueBf16, bf16.h), once per optimizer
  // step however many products read it.
  bool keeps_bf16 = false;
  DeviceBf16Buffer value_bf16;
  uint64_t value_bf16_version = 0;
};

// A parameter on the device with the CPU twin's initial value.
DeviceParam Upload(const Param& cpu);

struct Saved {
  std::vector<DeviceTensor> t;
  std::vector<Saved> inner;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string_view Name() const = 0;
  virtual DeviceTensor Forward(const Context& ctx, const DeviceTensor& x, Saved& saved, Mode mode) = 0;
  virtual DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) = 0;
  // The I/W split, as on the CPU: I then W adds what Backward adds.
  virtual DeviceTensor BackwardInput(const Context& ctx, const DeviceTensor& dy, Saved& saved) {
    return Backward(ctx, dy, saved);
  }
  virtual void BackwardWeight(const Context& /*ctx*/, Saved& /*saved*/) {}
  virtual std::vector<DeviceParam*> Params() { return {}; }
  virtual void EndStep(const Context& /*ctx*/) {}
  // As the CPU layer's: what is kept but not trained (batchnorm's running
  // mean, then variance), copied to the host after the context's stream.
  virtual void AppendState(const Context& /*ctx*/, std::vector<double>& /*out*/) const {}
};

// The CPU WeightedLayer's shape on the GPU: forward saves the input (Linear,
// in BF16, its bf16 copy); the input gradient needs the output gradient only,
// the weight gradients it and the input, so Backward and the I/W split follow
// from the two. (Linear's BF16 Backward converts dy once for both.)
class WeightedLayer : public Layer {
 public:
  DeviceTensor Backward(const Context& ctx, const DeviceTensor& dy, const Saved& saved) override {
    DeviceTensor dx = InputGradient(ctx, dy);
    AddWeightGradients(ctx, dy, saved.t.at(0));
    return dx;
  }
  DeviceTensor BackwardInput(const Context& ctx, const DeviceTensor& dy, Saved& saved) final {
    DeviceTensor dx = InputGradient(ctx, dy);
    saved.t.resize(1);
    saved.t.push_back(dy);
    return dx;
  }
  void BackwardWeight(const Context& ctx, Saved& saved) final {
    AddWeightGradients(ctx, saved.t.at(1), saved.t.at(0));
    saved.t.clear();
  }

 protected:
  virtual DeviceTensor InputGradient(const Context& ctx, const DeviceTensor& dy) = 0;
  virtual void AddWeightGradients(const Context& ctx, const DeviceTensor& dy, const DeviceTensor& x) = 0;
};

}  // namespace twinpipe::execute::cuda
