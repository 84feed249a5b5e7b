#include <random>

#include "execute/layers/layer.h"

namespace twinpipe::execute {

std::vector<float> InitUniform(uint64_t seed, size_t n, float bound) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-bound, bound);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace twinpipe::execute
