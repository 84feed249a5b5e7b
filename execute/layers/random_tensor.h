// Seeded standard-normal tensors, for tests of layers and backends.
//
//   Tensor x = RandomNormal(&account, 8, 64, /*seed=*/1);
#pragma once

#include <random>

#include "execute/tensor.h"

namespace twinpipe::execute {

inline Tensor RandomNormal(MemoryAccount* account, int rows, int cols, uint64_t seed) {
  Tensor t(account, rows, cols);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  for (int i = 0; i < rows * cols; ++i) t.data()[i] = n(rng);
  return t;
}

}  // namespace twinpipe::execute
