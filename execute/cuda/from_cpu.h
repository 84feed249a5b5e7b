// The CUDA twin of a CPU layer, with its current weights: the CUDA backend
// builds a model by building the CPU one (same seeds, same initial values)
// and converting it layer by layer.
//
//   auto cpu = BuildLayers(config, first, last);
//   Result<std::unique_ptr<cuda::Layer>> gpu = cuda::FromCpu(*cpu[0]);
#pragma once

#include <memory>

#include "execute/cuda/layer.h"
#include "ir/result.h"

namespace twinpipe::execute::cuda {

// Bad input when the CUDA backend has no twin for the layer (every layer of
// the mlp, transformer and cnn generators has one).
Result<std::unique_ptr<Layer>> FromCpu(execute::Layer& cpu);

}  // namespace twinpipe::execute::cuda
