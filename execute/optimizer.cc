#include "execute/optimizer.h"

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "execute/simd.h"

namespace twinpipe::execute {

Result<OptimizerKind> OptimizerOf(const cost::Config& config) {
  const std::string& name = config.training.optimizer;
  if (auto kind = OptimizerFromName(name)) return *kind;
  std::string names;
  for (const auto& [known, kind] : kOptimizerNames) names += fmt::format("{}{}", names.empty() ? "" : ", ", known);
  return Fail(fmt::format("{}: /training/optimizer: '{}' is not one of {}", config.source, name, names));
}

// Gradients in double, state and weights in float, arithmetic in double, as
// the reference numerics have it; sqrt vectorises because the library is
// built without errno from maths (-fno-math-errno).
TWINPIPE_SIMD_CLONES void AdamUpdate(float* __restrict value, float* __restrict m, float* __restrict v,
                                     double* __restrict grad, size_t n, double lr, int step) {
  constexpr double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const double correct1 = 1 / (1 - std::pow(b1, step)), correct2 = 1 / (1 - std::pow(b2, step));
  for (size_t i = 0; i < n; ++i) {
    const double g = grad[i];
    const double mi = b1 * m[i] + (1 - b1) * g, vi = b2 * v[i] + (1 - b2) * g * g;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    value[i] = static_cast<float>(value[i] - lr * (mi * correct1) / (std::sqrt(vi * correct2) + eps));
    grad[i] = 0;
  }
}

TWINPIPE_SIMD_CLONES void SgdUpdate(float* __restrict value, float* __restrict m, double* __restrict grad, size_t n,
                                    double lr, double momentum) {
  for (size_t i = 0; i < n; ++i) {
    m[i] = static_cast<float>(momentum * m[i] + grad[i]);
    value[i] = static_cast<float>(value[i] - lr * m[i]);
    grad[i] = 0;
  }
}

}  // namespace twinpipe::execute
