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
    constexpr double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const double correct1 = 1 / (1 - std::pow(b1, step)), correct2 = 1 / (1 - std::pow(b2, step));
    const size_t n = p.value.size();
    if (kind == "adam") {
      for (size_t i = 0; i < n; ++i) {
        const double g = p.grad[i];
        const double m = b1 * p.m[i] + (1 - b1) * g, v = b2 * p.v[i] + (1 - b2) * g * g;
        p.m[i] = static_cast<float>(m);
        p.v[i] = static_cast<float>(v);
        p.value[i] = static_cast<float>(p.value[i] - lr * (m * correct1) / (std::sqrt(v * correct2) + eps));
        p.grad[i] = 0;
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        p.m[i] = static_cast<float>(momentum * p.m[i] + p.grad[i]);
        p.value[i] = static_cast<float>(p.value[i] - lr * p.m[i]);
        p.grad[i] = 0;
      }
    }
  }
};

}  // namespace twinpipe::execute
