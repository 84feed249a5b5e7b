// What a plan costs and holds: per stage the seconds of each compute op kind
// (the cell's layers summed by the compute model, or as a calibration
// predicts them), per device the optimizer step, the links, and the one
// memory model: the bytes each op takes when it starts and gives back when it
// ends. The partitioner balances with these times, the `auto` builder plans
// with them, the search bounds with them and both simulator engines charge
// them, so every consumer of a plan reads one model.
//
//   PlanCosts costs = CostsFromPlan(config, plan, calibration);
//   double f_s = costs.compute_s[0][ComputeSlot(ir::OpKind::kForward)];
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "cost_models/calibration.h"
#include "cost_models/catalogue.h"
#include "cost_models/comm_model.h"
#include "cost_models/config.h"
#include "cost_models/memory_model.h"
#include "cost_models/plan.h"
#include "ir/builders.h"
#include "ir/dependencies.h"
#include "ir/passes.h"
#include "ir/schedule.h"

namespace twinpipe::cost {

// Index into PlanCosts::compute_s for F, B, I, W, R; -1 for other kinds.
int ComputeSlot(ir::OpKind kind);

struct PlanCosts {
  std::vector<std::array<double, 5>> compute_s;  // [stage][F, B, I, W, R]: seconds per micro-batch
  // [stage][F, B, I, W, R]: of compute_s, the expert all-to-alls' seconds
  // (LayerAllToAllTime), which an overlapped F/B pair (ir::Op::paired) hides
  // behind the other op's compute. Empty: none.
  std::vector<std::array<double, 5>> all_to_all_s;
  std::vector<double> step_s;                    // [device]: the optimizer step
  Link link;                                     // every device pair inside a node, and between replicas
  // Several nodes: the node of each pipeline device (replica 0's); a transfer
  // between two nodes runs on `inter_node_link` and shares its contention
  // domain (a sender's port, for InfiniBand). Empty: one node.
  std::vector<int32_t> node;
  Link inter_node_link;
  // Nodes the replicas of a pipeline device span: above 1, the data-parallel
  // all-reduce crosses `inter_node_link` (one port per GPU).
  int32_t replica_nodes = 1;
  // The GPUs that reduce a gradient: the replicas x the context-parallel
  // group (1 with neither).
  int32_t gradient_ranks = 1;
  // How replicas hold the training state. kOptimizer: a stage's ALLREDUCE is
  // a reduce-scatter of its gradients beside its last backward and an
  // all-gather of its parameters beside its first forward, of which only
  // what does not hide is charged (and the last bucket of each). kFull: the
  // layers' gathers and reduce-scatters are in compute_s; ALLREDUCE is free.
  DataParallelSharding sharding = DataParallelSharding::kNone;
  // [stage]: Megatron's gradient buckets the stage's parameters make
  // (max(40M, 1M x data-parallel ranks) parameters each; at least 1).
  std::vector<double> stage_buckets;
  // Bytes of a parameter the distributed optimizer gathers per byte of
  // gradient it reduce-scatters: the weights' bytes (1 with FP8 weights)
  // over the gradient's (/training/gradient_dtype), e.g. 2 / 4 for BF16
  // weights and Megatron's fp32 gradients.
  double gather_fraction = 1;
  const Link& LinkBetween(int32_t src, int32_t dst) const {
    return !node.empty() && node[src] != node[dst] ? inter_node_link : link;
  }
  // Above 1: a pipeline transfer carries 1/t of the boundary per GPU of a
  // t-GPU tensor-parallel group, and the receivers all-gather the whole
  // boundary over `link` before it can be used (Megatron's scatter-gather
  // without sequence parallelism; with it the boundary stays sharded).
  int32_t boundary_gather_ranks = 1;
  // Seconds of that all-gather after a transfer of `bytes` per GPU (0 without).
  double GatherSeconds(double bytes) const;
  // Seconds from the start of an idle transfer of `bytes` (per GPU) from
  // device `src` to `dst` until the receiver holds the boundary: the transfer
  // on its link, then the all-gather where there is one.
  double TransferSeconds(int32_t src, int32_t dst, double bytes) const {
    return BoundaryTransferTime(LinkBetween(src, dst), bytes, boundary_gather_ranks, link);
  }
  // Every channel carries one transfer at a time, sharing with none.
  bool Unshared() const;
  std::vector<double> activation_bytes;          // [stage]: what F keeps per micro-batch without recompute
  std::vector<double> input_bytes;               // [stage]: what a recomputed micro-batch keeps (CellActivations)
  // [stage]: what a recomputed micro-batch holds while its F runs and from
  // its R to its backward (CellActivations::rebuilt: per layer, the kept
  // inputs and one layer's activations). Empty: the whole activation, as a
  // per-cell recompute rebuilds it.
  std::vector<double> rebuilt_bytes;
  double RebuiltBytes(int32_t stage) const {
    return rebuilt_bytes.empty() ? activation_bytes[stage] : rebuilt_bytes[stage];
  }
  // What a micro-batch holds from its F (or R) until its backward frees it.
  double HeldBytes(int32_t stage, bool recomputed) const {
    return recomputed ? RebuiltBytes(stage) : activation_bytes[stage];
  }
  // [stage]: what a micro-batch keeps from its I to its W (the weight
  // gradients' inputs and output gradients; the Zero Bubble paper's M_W),
  // never more than it held. Empty: all it held, as the executors keep it.
  std::vector<double> pending_bytes;
  double PendingBytes(int32_t stage, bool recomputed) const {
    const double held = HeldBytes(stage, recomputed);
    return pending_bytes.empty() ? held : std::min(pending_bytes[stage], held);
  }
  std::vector<double> static_bytes;              // [device]: parameters, gradients, optimizer state
  // The CPU executor's workers run their sends and receives themselves, in
  // program order, between compute ops: a send occupies its device for the
  // transfer, a receive until the data is there. GPU devices overlap them,
  // unless the config says its framework's transfers block (Megatron-LM).
  bool comm_on_compute_stream = false;
  // [device]: the physical GPU it runs on, where some share one
  // (ClusterConfig::gpus): their compute ops run at once, each at 1/n of its
  // speed (processor sharing), as concurrent kernels on one GPU's streams
  // split its multiprocessors. Empty: each device its own GPU.
  std::vector<int32_t> gpu;
};

// Free communication, no memory, every stage alike: the closed-form setting.
PlanCosts UniformCosts(const ir::Schedule& schedule, double forward_s, double backward_s);

// The expected largest of n independent standard normal draws (0 for n <= 1;
// 1/sqrt(pi) for two): how many standard deviations a group of n GPUs that
// drift apart independently waits for its slowest when it meets.
double ExpectedMaxOfNormals(double n);

// The costs of a plan. With a calibration, its fitted coefficients replace
// the catalogue's (a device profile for its device kind, op fits, link, step).
PlanCosts CostsFromPlan(const Config& config, const Plan& plan, const Calibration* calibration = nullptr);

// Bytes per parameter of the optimizer's state: fp32 master weights beside
// half-precision ones (4), and Adam's two fp32 moments (8) or SGD's
// momentum (4). What the distributed optimizer shards.
double OptimizerStateBytes(const std::string& optimizer, Dtype dtype);

// Bytes a GPU holds for `params` parameters at training.bytes_per_param
// each (weights, gradients, optimizer state), sharded over `ranks` GPUs as
// ZeRO does: kOptimizer divides the optimizer state (Megatron's
// distributed optimizer: 6 + 12/d bytes for bf16 weights and fp32
// gradients), kFull everything (FSDP), plus the gathered weights and
// gradients of the running and the prefetched layer. FP8 adds the FP8
// weights and their transposes of the `fp8_params` of FP8 GEMMs (2 bytes).
double StaticBytesPerGpu(const TrainingConfig& training, Dtype dtype, DataParallelSharding sharding, double ranks,
                         double params, double fp8_params, double largest_layer_params);

// The config's static bytes of a GPU holding `params` (its cells' or one
// cell's): StaticBytesPerGpu over the `ranks` that reduce each gradient
// (Config::GradientRanks(); one rank shards nothing) for the dense
// parameters, over the expert data-parallel group (ranks / expert_parallel)
// for an MoE block's experts, with the FP8 copies unless the weights are
// FP8 (fp8_params). What CostsFromPlan charges each device and what the
// partitioners plan each cell with (MemoryInputs::static_bytes).
StaticBytesRule StaticBytesOf(const Config& config, double ranks);

// ---- The one memory model: per-op deltas (the cells' bytes: cost_models/memory_model.h) ----

// Memory an op takes when it starts and gives back when it ends (bytes on
// its device): F materialises the cell's activations or, when its
// (stage, micro-batch) is recomputed, what the recomputed forward holds at
// its most (RebuiltBytes), and keeps only what CellActivations keeps at its
// end; R rebuilds them; the last backward (B, or W after I) frees them; the
// op that consumes a received boundary frees its buffer. (The buffer itself
// is taken when its transfer starts: the engines charge it.)
double MemoryAtStart(const ir::Dependencies& deps, const PlanCosts& costs, const ir::Op& op);
double MemoryAtEnd(const ir::Dependencies& deps, const PlanCosts& costs, const ir::Op& op);
inline double MemoryAtStart(const ir::Dependencies& deps, const PlanCosts& costs, int32_t id) {
  return MemoryAtStart(deps, costs, deps.op(id));
}
inline double MemoryAtEnd(const ir::Dependencies& deps, const PlanCosts& costs, int32_t id) {
  return MemoryAtEnd(deps, costs, deps.op(id));
}

// A lower bound on the peak of the plan made from a compute-only schedule
// (as ir::BuildShape makes it: no comm, R only where `recompute` inserts
// it) on its fullest device, static bytes included, without simulating:
// each device's compute stream's own memory (MemoryAtStart / MemoryAtEnd
// without received buffers) walked in program order, as the engines count it.
double ComputeStreamPeak(const ir::Schedule& shape, ir::RecomputeMode recompute, const PlanCosts& costs);

// Seconds of a compute, STEP or ALLREDUCE op. (A transfer: TransferTime.)
double OpDuration(const ir::Op& op, const PlanCosts& costs, int32_t replicas);

// Seconds of every op (by id) where the schedule pairs an F with its
// device's next B or I (ir::Op::paired) and the costs have all-to-alls to
// hide: the two run overlapped, each op's all-to-all a hidden behind the
// other's compute c = T - a, what exceeds it exposed: the F takes
// T_F - min(a_F, c_B), the backward T_B - min(a_B, c_F) (together c_F + c_B
// + max(0, a_F - c_B) + max(0, a_B - c_F): never more than in turn, never
// less than either stream's work). Every other op: OpDuration. Empty when
// nothing pairs or hides (OpDuration holds for every op).
std::vector<double> OverlappedDurations(const ir::Schedule& schedule, const PlanCosts& costs);

// ---- The `auto` schedule ----

// The `auto` schedule's problem for a skeleton plan (one stage per device):
// its op times and activation memory from `costs` (CostsFromPlan of the
// skeleton), transfers on their links, and per stage the memory cap (at
// most the device's own; 0: that) less its parameters, optimizer state and
// two received boundaries.
ir::AutoProblem AutoProblemFor(const Config& config, const Plan& skeleton, const PlanCosts& costs,
                               double memory_cap_bytes);
// The cap the auto schedule plans to: `memory_cap_bytes` when above 0, else
// the config's /pipeline/memory_cap (0: the devices').
double AutoMemoryCap(const Config& config, double memory_cap_bytes);
// The `auto` schedule for a skeleton plan, planned with the times and memory
// this model (and calibration) charges, to AutoMemoryCap(config, memory_cap_bytes).
Result<ir::Schedule> BuildAutoSchedule(const Config& config, const Plan& skeleton, const Calibration* calibration,
                                       double memory_cap_bytes);

}  // namespace twinpipe::cost
