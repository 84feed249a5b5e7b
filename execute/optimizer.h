// Optimizers, applied once per mini-batch at STEP to each parameter's
// accumulated gradient, which they then clear: SGD with momentum
// (v = mu v + g; w -= lr v) and Adam (bias-corrected, beta1 0.9, beta2 0.999,
// eps 1e-8).
//
//   Optimizer opt{"adam", 1e-3, 0.9, /*step=*/1};  opt.Apply(param);
#pragma once

#include <cmath>
#include <string>

#include "execute/layers/layer.h"

namespace twinpipe::execute {

struct Optimizer {
  std::string kind;
  double lr, momentum;
  int step = 0;  // 1 for the first update (Adam's bias correction)

  void Apply(Param& p) const {
    if (p.m.empty()) p.m.assign(p.value.size(), 0.f);
    if (kind == "adam" && p.v.empty()) p.v.assign(p.value.size(), 0.f);
    for (size_t i = 0; i < p.value.size(); ++i) {
      const double g = p.grad[i];
      if (kind == "adam") {
        constexpr double b1 = 0.9, b2 = 0.999, eps = 1e-8;
        p.m[i] = static_cast<float>(b1 * p.m[i] + (1 - b1) * g);
        p.v[i] = static_cast<float>(b2 * p.v[i] + (1 - b2) * g * g);
        const double mhat = p.m[i] / (1 - std::pow(b1, step)), vhat = p.v[i] / (1 - std::pow(b2, step));
        p.value[i] = static_cast<float>(p.value[i] - lr * mhat / (std::sqrt(vhat) + eps));
      } else {
        p.m[i] = static_cast<float>(momentum * p.m[i] + g);
        p.value[i] = static_cast<float>(p.value[i] - lr * p.m[i]);
      }
      p.grad[i] = 0;
    }
  }
};

}  // namespace twinpipe::execute
