// Parameters filled with a constant (normalisation scales and shifts).
//
//   Param gamma = ConstantParam("gamma", 64, 1.f);
#pragma once

#include "execute/layers/layer.h"

namespace twinpipe::execute {

inline Param ConstantParam(const char* name, int n, float value) {
  return Param{name, std::vector<float>(n, value), std::vector<double>(n, 0.0), {}, {}};
}

}  // namespace twinpipe::execute
