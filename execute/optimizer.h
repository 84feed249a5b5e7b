// Optimizers, applied once per mini-batch at STEP to each parameter's
// accumulated gradient, which they then clear: SGD with momentum
// (v = mu v + g; w -= lr v) and Adam (bias-corrected, beta1 0.9, beta2 0.999,
// eps 1e-8). The config names the optimizer; OptimizerOf parses the name once,
// where the executor starts, and the updates switch on the kind.
//
//   Result<OptimizerKind> kind = OptimizerOf(config);   // bad input names /training/optimizer
//   Optimizer opt{*kind, 1e-3, 0.9, /*step=*/1};  opt.Apply(param);
#pragma once

#include <cstddef>

#include "cost_models/config.h"
#include "execute/layers/layer.h"
#include "execute/options.h"
#include "ir/result.h"

namespace twinpipe::execute {

// The updates over n elements (optimizer.cc: vectorised, the same results
// as one element at a time). `step` is 1 for the first update.
void AdamUpdate(float* __restrict value, float* __restrict m, float* __restrict v, double* __restrict grad, size_t n,
                double lr, int step);
void SgdUpdate(float* __restrict value, float* __restrict m, double* __restrict grad, size_t n, double lr,
               double momentum);

// The config's /training/optimizer as its kind; bad input naming that path
// and the names there are otherwise.
Result<OptimizerKind> OptimizerOf(const cost::Config& config);

struct Optimizer {
  OptimizerKind kind;
  double lr, momentum;
  int step = 0;  // 1 for the first update (Adam's bias correction)

  void Apply(Param& p) const {
    if (p.m.empty()) p.m.assign(p.value.size(), 0.f);
    if (kind == OptimizerKind::kAdam && p.v.empty()) p.v.assign(p.value.size(), 0.f);
    const size_t n = p.value.size();
    if (kind == OptimizerKind::kAdam) {
      AdamUpdate(p.value.data(), p.m.data(), p.v.data(), p.grad.data(), n, lr, step);
    } else {
      SgdUpdate(p.value.data(), p.m.data(), p.grad.data(), n, lr, momentum);
    }
  }
};

}  // namespace twinpipe::execute
