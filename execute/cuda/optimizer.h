// The optimizers of execute/optimizer.h on the GPU, one kernel per
// parameter: SGD with momentum, or Adam; the gradient is cleared after, and
// the value's version bumped (its bf16 copy is made again at its next use).
//
//   Apply(ctx, OptimizerKind::kAdam, lr, momentum, /*step=*/1, param);
#pragma once

#include "execute/cuda/layer.h"
#include "execute/options.h"

namespace twinpipe::execute::cuda {

void Apply(const Context& ctx, OptimizerKind kind, double lr, double momentum, int step, DeviceParam& p);

}  // namespace twinpipe::execute::cuda
