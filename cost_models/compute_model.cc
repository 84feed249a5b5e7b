#include "cost_models/compute_model.h"

#include <algorithm>
#include <cmath>

namespace twinpipe::cost {
namespace {

// Tensor cores take a half-precision GEMM at full rate when its dimensions
// are multiples of 8 elements (16 bytes), a TF32 one multiples of 4 (NVIDIA
// Deep Learning Performance Guide, "Matrix Multiplication Background":
// "Tensor Core Requirements"). A half-precision GEMM aligned to 4 or 2
// elements runs cuBLAS's kernels that load operands 8 or 4 bytes at a time:
// bound by those loads, each halving of the width halves the rate, down to
// an odd dimension's 2-byte loads, which run at about the CUDA cores' rate.
// vTrain's A100 runs show both ends: an odd vocabulary projection (50257
// columns) at 71 TFLOP/s, its 25128-column half on 2 GPUs at 190 TFLOP/s or
// more (traces/published/README.md).
double GemmPeak(const Device& d, Dtype dtype, double m, double n, double k) {
  const auto divides = [&](double a) { return std::fmod(m, a) == 0 && std::fmod(n, a) == 0 && std::fmod(k, a) == 0; };
  if (dtype == Dtype::kTf32) return divides(4) ? d.PeakFlops(dtype) : d.fp32_flops;
  if (divides(8)) return d.PeakFlops(dtype);
  if ((dtype == Dtype::kFp16 || dtype == Dtype::kBf16) && d.simt_half_flops > 0) {
    const double elements = divides(4) ? 4 : divides(2) ? 2 : 1;
    return std::min(d.PeakFlops(dtype), elements * d.simt_half_flops);
  }
  return d.PeakFlops(dtype);
}

// cuBLAS's large half-precision tiles on Ampere and Hopper: 128 x 128
// outputs per thread block, one block per SM at a time.
constexpr double kTile = 128;
// Each output tile's prologue and epilogue (loading the first operands,
// writing C) cost about as much as 16 steps of its K loop: an estimate.
constexpr double kTileOverheadK = 16;

bool IsBackward(ir::OpKind kind) {
  return kind == ir::OpKind::kBackward || kind == ir::OpKind::kBackwardInput || kind == ir::OpKind::kBackwardWeight;
}

bool RunsIn(ir::OpKind kind, Kernel::Pass pass) {
  switch (kind) {
    case ir::OpKind::kForward:
    case ir::OpKind::kRecompute: return pass == Kernel::Pass::kForward;
    case ir::OpKind::kBackward: return pass != Kernel::Pass::kForward;
    case ir::OpKind::kBackwardInput: return pass == Kernel::Pass::kInput;
    case ir::OpKind::kBackwardWeight: return pass == Kernel::Pass::kWeight;
    default: return false;
  }
}

}  // namespace

double LayerOpFlops(const Layer& l, ir::OpKind kind) {
  switch (kind) {
    case ir::OpKind::kForward: return l.fwd_flops;
    case ir::OpKind::kRecompute: return l.rematerialized ? l.fwd_flops : 0;
    case ir::OpKind::kBackward: return l.bwd_input_flops + l.bwd_weight_flops;
    case ir::OpKind::kBackwardInput: return l.bwd_input_flops;
    case ir::OpKind::kBackwardWeight: return l.bwd_weight_flops;
    default: return 0;
  }
}

double KernelTime(const Kernel& kn, double samples, const Device& d, Dtype dtype, double efficiency,
                  const Link* link) {
  const double e = DtypeBytes(dtype);
  const double bandwidth = d.memory_bandwidth * d.bandwidth_efficiency;
  if (kn.collective != Kernel::Collective::kNone) {
    return link ? CollectiveTime(kn.collective, kn.bytes * samples, kn.group, *link) : 0;
  }
  if (!kn.gemm) return kn.bytes * samples / bandwidth;
  double m = kn.m, n = kn.n, k = kn.k, batch = kn.batch;
  switch (kn.scaled) {
    case Kernel::Scaled::kM: m *= samples; break;
    case Kernel::Scaled::kN: n *= samples; break;
    case Kernel::Scaled::kK: k *= samples; break;
    case Kernel::Scaled::kBatch: batch *= samples; break;
  }
  double fill = 1;
  if (d.sm_count > 0) {
    const double tiles = std::ceil(m / kTile) * std::ceil(n / kTile) * batch;
    const double waves = std::ceil(tiles / d.sm_count);
    fill = tiles / (waves * d.sm_count);
  }
  const double flops = 2 * m * n * k * batch;
  const double compute_s = flops / (GemmPeak(d, dtype, m, n, k) * efficiency * fill * (k / (k + kTileOverheadK)));
  const double memory_s = (m * k + k * n + m * n) * batch * e / bandwidth;
  return std::max(compute_s, memory_s);
}

double LayerOpTime(const Layer& l, ir::OpKind kind, const Device& device, Dtype dtype, double efficiency,
                   double samples, const Link* tp_link) {
  if (kind == ir::OpKind::kRecompute && !l.rematerialized) return 0;
  if (!l.kernels.empty()) {
    double device_s = 0, launched = 0;
    for (const Kernel& kn : l.kernels) {
      if (!RunsIn(kind, kn.pass) || !RunsFor(kn, samples)) continue;
      device_s += KernelTime(kn, samples, device, dtype, efficiency, tp_link);
      if (kn.collective == Kernel::Collective::kNone) device_s += kn.launches * kOpsPerKernel * device.kernel_floor_s;
      launched += kn.launches;
    }
    return std::max(device_s, launched * kOpsPerKernel * device.launch_overhead_s);
  }
  const double flops = LayerOpFlops(l, kind) * samples;
  if (flops == 0 && l.params == 0) return 0;
  const double e = DtypeBytes(dtype);
  const double param_bytes = l.params * e * (IsBackward(kind) ? 2 : 1);
  const double activation_bytes = (l.out_bytes + l.stash_bytes) * samples;
  const double compute_s = flops / (device.PeakFlops(dtype) * efficiency);
  const double memory_s = (param_bytes + activation_bytes) / device.memory_bandwidth;
  return device.launch_overhead_s + std::max(compute_s, memory_s);
}

double OptimizerStepBytes(const std::string& optimizer, Dtype dtype) {
  const bool half = dtype == Dtype::kFp16 || dtype == Dtype::kBf16;
  if (optimizer == "adam") return half ? 44 : 28;
  return 20;
}

double OptimizerStepTime(const std::string& optimizer, Dtype dtype, double params, const Device& device) {
  return device.launch_overhead_s +
         params * OptimizerStepBytes(optimizer, dtype) / (device.memory_bandwidth * device.bandwidth_efficiency);
}

}  // namespace twinpipe::cost
