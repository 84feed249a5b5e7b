#include "cost_models/compute_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

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
struct GemmRate {
  double peak = 0;          // FLOP/s
  bool tensor_cores = true; // false: the CUDA cores' fp32 or half path
};
GemmRate GemmPeak(const Device& d, Dtype dtype, double m, double n, double k) {
  const auto divides = [&](double a) { return std::fmod(m, a) == 0 && std::fmod(n, a) == 0 && std::fmod(k, a) == 0; };
  if (dtype == Dtype::kTf32) return divides(4) ? GemmRate{d.PeakFlops(dtype)} : GemmRate{d.fp32_flops, false};
  if (dtype == Dtype::kFp8) return {d.fp8_flops};  // GemmDtype chose FP8: the shape fits it
  if (divides(8)) return {d.PeakFlops(dtype)};
  if ((dtype == Dtype::kFp16 || dtype == Dtype::kBf16) && d.simt_half_flops > 0) {
    if (!divides(2)) return {d.simt_half_flops, false};
    // Aligned to 4 or 2 elements: the tensor cores, bound by 8- or 4-byte loads.
    return {std::min(d.PeakFlops(dtype), (divides(4) ? 4 : 2) * d.simt_half_flops)};
  }
  return {d.PeakFlops(dtype), d.PeakFlops(dtype) > d.fp32_flops};
}

// The precision a GEMM runs in: an fp8 model's GEMMs marked fp8 run in FP8
// where the device has FP8 tensor cores and every dimension is a multiple
// of 16 (Transformer Engine's requirement); its other GEMMs run in BF16.
Dtype GemmDtype(const Kernel& kn, const Device& d, Dtype dtype, double m, double n, double k) {
  if (dtype != Dtype::kFp8) return dtype;
  const bool aligned = std::fmod(m, 16) == 0 && std::fmod(n, 16) == 0 && std::fmod(k, 16) == 0;
  return kn.fp8 && d.fp8_flops > 0 && aligned ? Dtype::kFp8 : Dtype::kBf16;
}

// cuBLAS's tensor-core tiles on Ampere and Hopper (NVIDIA, "Matrix
// Multiplication Background User's Guide", 2023, section 2.3: 256 x 128 and
// 128 x 256 the most efficient, then 128 x 128, down to 64 x 64 the least;
// a heuristic picks one per shape). Each tile's rate per SM, relative to the
// large tiles': a tile of TM x TN outputs loads TM + TN operand rows per K
// step for its TM x TN multiply-adds, and below 128 x 128's 64 per row the
// SM waits on those loads, so rate = min(1, TM TN / (TM + TN) / 64). One
// tile per SM at a time: a wave is sm_count tiles (the guide's example: 108
// tiles of 256 x 128 on an A100).
struct Tile {
  double m, n, rate;
};
constexpr std::array<Tile, 6> kTiles{{{256, 128, 1.0}, {128, 256, 1.0}, {128, 128, 1.0},
                                      {128, 64, 2.0 / 3}, {64, 128, 2.0 / 3}, {64, 64, 0.5}}};
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

double TiledGemmSeconds(double m, double n, double k, double batch, int sm_count, double rate, double bandwidth,
                        double out_bytes, double store_bytes) {
  if (sm_count <= 0) return 2 * m * n * k * batch / rate;
  const double sms = sm_count;
  double best = std::numeric_limits<double>::infinity();
  for (const Tile& t : kTiles) {
    const double tiles = std::ceil(m / t.m) * std::ceil(n / t.n) * batch;
    const double per_k = 2 * t.m * t.n * sms / (rate * t.rate);  // one tile's seconds per K step
    const double store = t.m * t.n * store_bytes * sms / bandwidth;  // one tile's epilogue at its SM's share
    best = std::min(best, std::ceil(tiles / sms) * (per_k * (k + kTileOverheadK) + store));
    // Split-K where one wave leaves SMs idle: s slices of K, one wave of
    // tiles x s, each slice writing its fp32 partial output (4 bytes an
    // element) and one more pass reading the s partials and writing the
    // result: per_k (k / s + overhead) + s c, c = 8 m n batch / bandwidth,
    // least at s = sqrt(per_k k / c), at most sms / tiles.
    const double most = std::floor(sms / tiles);
    if (most < 2) continue;
    const double c = 8 * m * n * batch / bandwidth, fixed = m * n * batch * out_bytes / bandwidth;
    const double ideal = std::sqrt(per_k * k / c);
    for (const double slices : {std::floor(ideal), std::ceil(ideal)}) {
      const double s_ = std::clamp(slices, 2.0, most);
      best = std::min(best, per_k * (k / s_ + kTileOverheadK) + s_ * c + fixed);
    }
  }
  return best;
}

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
                  const CollectiveLinks& links) {
  const double e = DtypeBytes(dtype);
  const double bandwidth = d.memory_bandwidth * d.bandwidth_efficiency;
  if (kn.collective != Kernel::Collective::kNone) {
    if (!links.intra) return 0;
    const double bytes = kn.fixed_bytes ? kn.bytes : kn.bytes * samples;
    const double nodes = kn.over == Kernel::Over::kContext ? links.context_nodes
                         : kn.over == Kernel::Over::kData  ? links.data_nodes
                         : kn.over == Kernel::Over::kExpert ? links.expert_nodes
                                                           : 1;
    // The context-parallel ring passes K and V by point-to-point sends.
    return CollectiveTime(kn.collective, bytes,
                          {.ranks = kn.group, .nodes = nodes, .intra = links.intra,
                           .inter = links.inter ? links.inter : links.intra,
                           .rails = kn.over != Kernel::Over::kContext});
  }
  if (!kn.gemm) return kn.bytes * samples / bandwidth;
  const auto [m, n, k, batch] = ShapeFor(kn, samples);
  const Dtype gemm = GemmDtype(kn, d, dtype, m, n, k);
  const GemmRate peak = GemmPeak(d, gemm, m, n, k);
  // On the CUDA cores (an odd half-precision shape, an unaligned TF32 one)
  // a GEMM runs at kSimtEfficiency of their rate; on the tensor cores at
  // `efficiency` (an FP8 GEMM at fp8_gemm_ratio of that).
  const double rate = peak.peak * (!peak.tensor_cores       ? kSimtEfficiency
                                   : gemm == Dtype::kFp8 ? efficiency * d.fp8_gemm_ratio
                                                         : efficiency);
  // A weight-gradient GEMM adds this micro-batch's gradient into the one
  // kept across the micro-batches (Megatron's gradient accumulation fusion,
  // C = A B + C), read and written. That gradient is the config's
  // /training/gradient_dtype (the kernel's accumulate_bytes), by default
  // Megatron's: fp32 in bf16 and FP8 training, fp16 in fp16 training. On a
  // GPU the read of C is issued while the K loop runs; the write can only
  // follow the math: m n x its bytes after it, in series.
  const bool accumulates = kn.pass == Kernel::Pass::kWeight;
  const double accumulated = kn.accumulate_bytes > 0 ? kn.accumulate_bytes : GradientAccumulationBytes(dtype);
  const double out_bytes = accumulates ? 2 * accumulated : e;
  const double store_s = accumulates && d.sm_count > 0 ? accumulated * m * n * batch / bandwidth : 0;
  // Any other GEMM's epilogue writes its tile's outputs (none where they
  // stay on the SM, as a flash attention's scores do): the device's
  // epilogue_store share of that store follows its K loop.
  const double epilogue = accumulates || kn.output_on_chip ? 0 : d.epilogue_store * e;
  const double compute_s = TiledGemmSeconds(m, n, k, batch, d.sm_count, rate, bandwidth, e, epilogue) + store_s;
  const double operand = gemm == Dtype::kFp8 ? 1 : e;  // FP8 operands, a BF16 result
  const double memory_s = ((m * k + k * n) * operand + m * n * out_bytes) * batch / bandwidth;
  return std::max(compute_s, memory_s);
}

double Overlapped(double compute_s, double hidden_s, const Device& device) {
  // The slowing lasts while both run: at most the compute's own length.
  return std::max(compute_s + device.overlap_interference * std::min(hidden_s, compute_s), hidden_s);
}

double LayerOpTime(const Layer& l, ir::OpKind kind, const Device& device, Dtype dtype, double efficiency,
                   double samples, const CollectiveLinks& links) {
  if (kind == ir::OpKind::kRecompute && !l.rematerialized) return 0;
  if (!l.kernels.empty()) {
    const Kernel* first = l.kernels.begin();
    const auto runs = [&](const Kernel& kn) { return RunsIn(kind, kn.pass) && RunsFor(kn, samples); };
    // Overlapped collectives first: the seconds each GEMM (or the op) has
    // beside it, hidden and exposed.
    thread_local std::vector<std::pair<double, double>> beside;
    beside.assign(l.kernels.size(), {0.0, 0.0});
    // Host seconds to issue the op's kernels: per launch, the CUDA launch and
    // the framework ops that issue it.
    double op_hidden = 0, op_exposed = 0, host_s = 0;
    const auto issue = [&](const Kernel& kn) {
      host_s += kn.launches * (device.kernel_launch_s + kn.framework_ops * device.launch_overhead_s);
    };
    bool any_beside = false;
    for (const Kernel& kn : l.kernels) {
      if (kn.overlaps == Kernel::kInSeries || !runs(kn)) continue;
      const double s = KernelTime(kn, samples, device, dtype, efficiency, links);
      if (kn.overlaps == Kernel::kBesideOp) {
        op_hidden += (1 - kn.exposed) * s;
        op_exposed += kn.exposed * s;
      } else if (runs(first[kn.overlaps])) {
        beside[kn.overlaps].first += (1 - kn.exposed) * s;
        beside[kn.overlaps].second += kn.exposed * s;
      } else {
        op_exposed += s;  // what it hides behind does not run in this op: in series
      }
      any_beside = true;
      issue(kn);
    }
    double device_s = 0;
    for (size_t i = 0; i < l.kernels.size(); ++i) {
      const Kernel& kn = first[i];
      if (kn.overlaps != Kernel::kInSeries || !runs(kn)) continue;
      double s = KernelTime(kn, samples, device, dtype, efficiency, links);
      if (any_beside) s = Overlapped(s, beside[i].first, device) + beside[i].second;
      device_s += s;
      if (kn.collective == Kernel::Collective::kNone) {
        device_s += kn.launches * kn.framework_ops * device.kernel_floor_s;
      }
      issue(kn);
    }
    device_s = Overlapped(device_s, op_hidden, device) + op_exposed;
    return std::max(device_s, host_s);
  }
  const double flops = LayerOpFlops(l, kind) * samples;
  if (flops == 0 && l.params == 0) return 0;
  const double e = DtypeBytes(dtype);
  const double param_bytes = l.params * e * (IsBackward(kind) ? 2 : 1);
  const double activation_bytes = (l.out_bytes + l.stash_bytes) * samples;
  const double compute_s = flops / (device.PeakFlops(dtype) * efficiency);
  const double memory_s = (param_bytes + activation_bytes) / device.memory_bandwidth;
  return device.kernel_launch_s + device.launch_overhead_s + std::max(compute_s, memory_s);
}

double LayerAllToAllTime(const Layer& l, ir::OpKind kind, const Device& device, Dtype dtype, double samples,
                         const CollectiveLinks& links) {
  if (kind == ir::OpKind::kRecompute && !l.rematerialized) return 0;
  double s = 0;
  for (const Kernel& kn : l.kernels) {
    if (kn.collective != Kernel::Collective::kNone && kn.over == Kernel::Over::kExpert &&
        kn.overlaps == Kernel::kInSeries && RunsIn(kind, kn.pass) && RunsFor(kn, samples)) {
      s += KernelTime(kn, samples, device, dtype, 1, links);
    }
  }
  return s;
}

double OptimizerStepBytes(const std::string& optimizer, Dtype dtype) {
  const bool half = HalfStorage(dtype);
  if (optimizer == "adam") return half ? 44 : 28;
  return 20;
}

double OptimizerStepTime(const std::string& optimizer, Dtype dtype, double params, const Device& device) {
  return device.kernel_launch_s + device.launch_overhead_s +
         params * OptimizerStepBytes(optimizer, dtype) / (device.memory_bandwidth * device.bandwidth_efficiency);
}

}  // namespace twinpipe::cost
