// Compute time of a layer's ops on a device. A layer given as its kernels
// (generated transformers) is timed kernel by kernel: a GEMM by its shape
// (output tiles filling the SMs in waves, tensor-core or CUDA-core peak by
// alignment, a small-K penalty) against the bytes it moves, a memory-bound
// kernel by its bytes at the achievable bandwidth; the op takes the longer
// of its kernels' device time and the host time to issue them. Any other
// layer: a roofline (FLOPs at peak x efficiency against bytes at memory
// bandwidth) plus one launch.
//
//   double t = LayerOpTime(layer, ir::OpKind::kForward, device, dtype, 0.8, 32);
#pragma once

#include "cost_models/catalogue.h"
#include "cost_models/comm_model.h"
#include "cost_models/model.h"
#include "ir/op.h"

namespace twinpipe::cost {

// FLOPs of one op kind for one sample: F and R run the forward, B both
// backward halves, I the input half, W the weight half. Comm ops: 0. R of a
// layer that is not rematerialized: 0.
double LayerOpFlops(const Layer& layer, ir::OpKind kind);

// Where a layer's collectives run (Megatron's placement: tensor-parallel
// groups inside a node, then context, then data parallelism): a tensor-
// parallel collective on `intra`; a context- or data-parallel one over its
// group's GPUs spread on `context_nodes` or `data_nodes` nodes, joined by
// `inter` between them. No `intra`: collectives cost nothing (a layer of
// tensor parallelism 1 has none).
struct CollectiveLinks {
  const Link* intra = nullptr;
  const Link* inter = nullptr;
  double context_nodes = 1;
  double data_nodes = 1;
  double expert_nodes = 1;  // the expert-parallel group's
};

// The achievable fraction of their rate a GEMM reaches on the CUDA cores (a
// half-precision shape with an odd dimension, a TF32 one not aligned to 4):
// vTrain's A100 runs put an odd vocabulary projection (50,257 columns) at
// about 71 of the 78 TFLOP/s fp16 CUDA-core peak (traces/published/
// README.md). A constant, not a fitted coefficient: the GEMM efficiency is
// the tensor cores' alone.
inline constexpr double kSimtEfficiency = 0.9;

// Seconds of a GEMM's math (batch x m x n x k multiply-adds) on a GPU of
// `sm_count` SMs whose large GEMMs reach `rate` FLOP/s: cuBLAS's tile
// choice, the fastest of its tile shapes (256 x 128 to 64 x 64) in waves of
// one tile per SM, a partial tile costing a whole one, each tile paying a
// prologue and epilogue worth 16 K steps; where one wave leaves SMs idle,
// split-K into the best number of slices (their fp32 partial outputs
// written and reduced at `bandwidth` bytes/s into `out_bytes` an element).
// `store_bytes` an output element: what each tile's epilogue writes after
// its K loop, in series with it, at its SM's share of `bandwidth` (0: the
// store hidden behind other tiles' math). Never less for a larger m, n or
// k; as k grows the time approaches 2 m n k batch / rate; sm_count 0 (no
// wave model): exactly that.
double TiledGemmSeconds(double m, double n, double k, double batch, int sm_count, double rate, double bandwidth,
                        double out_bytes = 2, double store_bytes = 0);

// Seconds of one kernel over `samples` samples on the device's GPU alone
// (no launch): `efficiency` is the GEMM's achievable fraction of peak. With
// an fp8 model, a kernel marked fp8 whose dimensions are multiples of 16
// (Transformer Engine's requirement) runs at the FP8 peak with 1-byte
// operands; every other GEMM runs in BF16. A weight-gradient GEMM
// (Kernel::Pass::kWeight) adds into the gradient kept across the
// micro-batches (the kernel's accumulate_bytes, /training/gradient_dtype;
// unset: GradientAccumulationBytes(dtype), fp32, or fp16 in fp16 training):
// its roofline reads and writes it, and on a GPU its store follows the K
// loop in series.
double KernelTime(const Kernel& kernel, double samples, const Device& device, Dtype dtype, double efficiency,
                  const CollectiveLinks& links = {});

// Seconds for `samples` samples (a micro-batch) of one op kind of one layer.
// With kernels: max(sum of the kind's kernel times, each but a collective
// with its framework ops x the device's kernel floor; the host time: per
// kernel launched, kernel_launch_s + its framework ops x launch_overhead_s).
// Without: one op's host time (kernel_launch_s + launch_overhead_s) +
// max(flops / (peak(dtype) x efficiency), bytes / bandwidth), where bytes =
// parameter reads (and gradient writes for backward) + activations in, out
// and stashed.
// Collectives among the kernels are priced on `links`. An overlapped
// collective (Kernel::overlaps) adds only the device's
// overlap_interference of its hidden share while the compute it runs
// beside is longer: that GEMM (or the op's compute) takes
// Overlapped(compute, hidden share) + exposed share of its collectives'
// seconds.
double LayerOpTime(const Layer& layer, ir::OpKind kind, const Device& device, Dtype dtype,
                   double efficiency, double samples, const CollectiveLinks& links);

// Seconds of `compute_s` with `hidden_s` of collectives overlapped beside
// it: max(compute_s + device.overlap_interference x min(hidden_s,
// compute_s), hidden_s). The interference slows the compute only while the
// two run side by side, so a GEMM is lengthened by at most x times its own
// time; never more than the two in series.
double Overlapped(double compute_s, double hidden_s, const Device& device);
// The same with every collective inside one node on `tp_link` (none: free).
inline double LayerOpTime(const Layer& layer, ir::OpKind kind, const Device& device, Dtype dtype,
                          double efficiency, double samples, const Link* tp_link = nullptr) {
  return LayerOpTime(layer, kind, device, dtype, efficiency, samples,
                     CollectiveLinks{.intra = tp_link, .inter = tp_link});
}

// Of LayerOpTime's seconds, those of the dispatcher's collectives over the
// expert group (dispatch and combine: all-to-alls, or the all-gather
// dispatcher's all-gather and reduce-scatter) that run in series in `kind`:
// what an overlapped F/B pair can hide behind the other op's compute. 0
// for a layer without them.
double LayerAllToAllTime(const Layer& layer, ir::OpKind kind, const Device& device, Dtype dtype, double samples,
                         const CollectiveLinks& links);

// Bytes per parameter an optimizer step reads and writes: Adam in mixed
// precision (half weights and gradients, fp32 master weights and two
// moments) 44: unscale the gradient to fp32 (2 + 4), its norm for clipping
// (4), Adam (reads gradient, master, both moments: 16; writes master and
// moments: 12), the half copy of the master (4 + 2). Adam in fp32: 28. SGD
// with momentum: 20 (reads weight, gradient, momentum; writes two).
double OptimizerStepBytes(const std::string& optimizer, Dtype dtype);

// Seconds of the optimizer step over `params` parameters on the device.
double OptimizerStepTime(const std::string& optimizer, Dtype dtype, double params, const Device& device);

}  // namespace twinpipe::cost
