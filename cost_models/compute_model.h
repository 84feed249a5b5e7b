// Compute time of a layer's ops on a device: a roofline (FLOPs at peak x
// efficiency against bytes at memory bandwidth) plus a fixed launch overhead.
//
//   double t = LayerOpTime(layer, ir::OpKind::kForward, device, dtype, 0.5, 32);
#pragma once

#include "cost_models/catalogue.h"
#include "cost_models/model.h"
#include "ir/op.h"

namespace twinpipe::cost {

// FLOPs of one op kind for one sample: F and R run the forward, B both
// backward halves, I the input half, W the weight half. Comm ops: 0.
double LayerOpFlops(const Layer& layer, ir::OpKind kind);

// Seconds for `samples` samples (a micro-batch) of one op kind of one layer:
// launch + max(flops / (peak(dtype) x efficiency), bytes / bandwidth), where
// bytes = parameter reads (and gradient writes for backward) + activations in,
// out and stashed.
double LayerOpTime(const Layer& layer, ir::OpKind kind, const Device& device, Dtype dtype,
                   double efficiency, double samples);

}  // namespace twinpipe::cost
