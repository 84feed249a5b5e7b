#include "cost_models/compute_model.h"

#include <algorithm>

namespace twinpipe::cost {

double LayerOpFlops(const Layer& l, ir::OpKind kind) {
  switch (kind) {
    case ir::OpKind::kForward:
    case ir::OpKind::kRecompute: return l.fwd_flops;
    case ir::OpKind::kBackward: return l.bwd_input_flops + l.bwd_weight_flops;
    case ir::OpKind::kBackwardInput: return l.bwd_input_flops;
    case ir::OpKind::kBackwardWeight: return l.bwd_weight_flops;
    default: return 0;
  }
}

double LayerOpTime(const Layer& l, ir::OpKind kind, const Device& device, Dtype dtype, double efficiency,
                   double samples) {
  const double flops = LayerOpFlops(l, kind) * samples;
  if (flops == 0 && l.params == 0) return 0;
  const double e = DtypeBytes(dtype);
  const bool backward = kind == ir::OpKind::kBackward || kind == ir::OpKind::kBackwardInput ||
                        kind == ir::OpKind::kBackwardWeight;
  const double param_bytes = l.params * e * (backward ? 2 : 1);
  const double activation_bytes = (l.out_bytes + l.stash_bytes) * samples;
  const double compute_s = flops / (device.PeakFlops(dtype) * efficiency);
  const double memory_s = (param_bytes + activation_bytes) / device.memory_bandwidth;
  return device.launch_overhead_s + std::max(compute_s, memory_s);
}

}  // namespace twinpipe::cost
