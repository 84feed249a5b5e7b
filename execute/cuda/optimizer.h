// The optimizers of execute/optimizer.h on the GPU, one kernel per
// parameter: SGD with momentum, or Adam; the gradient is cleared after.
//
//   Apply(ctx, "adam", lr, momentum, /*step=*/1, param);
#pragma once

#include <string>

#include "execute/cuda/layer.h"

namespace twinpipe::execute::cuda {

void Apply(const Context& ctx, const std::string& kind, double lr, double momentum, int step, DeviceParam& p);

}  // namespace twinpipe::execute::cuda
