// Helpers shared by the cost-model tests: a field summed over a model's
// layers, a layer's kernels' FLOPs in one pass, a kernel by name.
#pragma once

#include <string>

#include "cost_models/model.h"

namespace twinpipe::cost::testing {

inline double Sum(const Model& m, double Layer::*field) {
  double s = 0;
  for (const auto& l : m.layers) s += l.*field;
  return s;
}

inline double PassFlops(const Layer& l, Kernel::Pass pass) {
  double f = 0;
  for (const Kernel& k : l.kernels) f += k.pass == pass ? k.Flops() : 0;
  return f;
}

inline const Kernel* Find(const Layer& l, const std::string& name) {
  for (const Kernel& k : l.kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

}  // namespace twinpipe::cost::testing
