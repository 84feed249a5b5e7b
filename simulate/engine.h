// The discrete-event simulator: predicts one training step of a verified
// schedule, op by op, exactly in time (no time step).
//
// Each device has a compute engine (compute ops in program order, one at a
// time) and an all-reduce engine; transfers run on a FIFO channel per ordered
// device pair and start when their send's producer is done and the channel's
// previous transfer has finished (receives are posted ahead, as a GPU's
// communication stream does). A transfer takes latency + bytes / bandwidth
// (twice, through host memory, when host-staged), sharing bandwidth equally
// with the transfers active in its contention domain. Compute ops wait for
// their data: the receive or the same-device op that produced their input.
//
//   SimCosts costs = UniformCosts(schedule, /*forward_s=*/1e-3, /*backward_s=*/2e-3);
//   Result<SimResult> r = Simulate(schedule, costs);
//   r->step_time_s; r->bubble_fraction;
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "cost_models/catalogue.h"
#include "cost_models/comm_model.h"
#include "ir/huge_page_allocator.h"
#include "ir/passes.h"
#include "ir/result.h"
#include "ir/schedule.h"

namespace twinpipe::simulate {

using ir::BigVector;

// Index into SimCosts::compute_s for F, B, I, W, R.
int ComputeSlot(ir::OpKind kind);

struct SimCosts {
  std::vector<std::array<double, 5>> compute_s;  // [stage][F, B, I, W, R]: seconds per micro-batch
  std::vector<double> step_s;                    // [device]: the optimizer step
  cost::Link link;                               // every device pair inside a node, and between replicas
  // Several nodes: the node of each pipeline device (replica 0's); a transfer
  // between two nodes runs on `inter_node_link` and shares its contention
  // domain (a sender's port, for InfiniBand). Empty: one node.
  std::vector<int32_t> node;
  cost::Link inter_node_link;
  // Nodes the replicas of a pipeline device span: above 1, the data-parallel
  // all-reduce crosses `inter_node_link` (one port per GPU).
  int32_t replica_nodes = 1;
  const cost::Link& LinkBetween(int32_t src, int32_t dst) const {
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
    return cost::BoundaryTransferTime(LinkBetween(src, dst), bytes, boundary_gather_ranks, link);
  }
  // Every channel carries one transfer at a time, sharing with none.
  bool Unshared() const;
  std::vector<double> activation_bytes;          // [stage]: what F keeps per micro-batch without recompute
  std::vector<double> input_bytes;               // [stage]: the boundary input kept with recompute
  // [stage]: what a micro-batch keeps from its I to its W (the weight
  // gradients' inputs and output gradients; the Zero Bubble paper's M_W).
  // Empty: the whole activation, as the executors keep it.
  std::vector<double> pending_bytes;
  double PendingBytes(int32_t stage) const {
    return pending_bytes.empty() ? activation_bytes[stage] : pending_bytes[stage];
  }
  std::vector<double> static_bytes;              // [device]: parameters, gradients, optimizer state
  // The CPU executor's workers run their sends and receives themselves, in
  // program order, between compute ops: a send occupies its device for the
  // transfer, a receive until the data is there. GPU devices overlap them,
  // unless the config says its framework's transfers block (Megatron-LM).
  bool comm_on_compute_stream = false;
};

// Free communication, no memory, every stage alike: the closed-form setting.
SimCosts UniformCosts(const ir::Schedule& schedule, double forward_s, double backward_s);

struct DeviceStats {
  double busy_s = 0;            // compute engine busy time
  // The compute engine's first start and last end (its span); -1 when idle.
  double first_start_s = -1, last_end_s = -1;
  double peak_memory_bytes = 0;
  int32_t peak_op = -1;         // the op at whose start or end the peak happens
};

struct LinkStats {
  int32_t src = 0, dst = 0;
  int64_t bytes = 0;
  double busy_s = 0;            // sum of its transfers' durations
};

struct SimResult {
  double step_time_s = 0;
  double bubble_fraction = 0;   // idle / (devices x step time)
  // When consecutive steps overlap (each device starts its next step as soon
  // as its own work is done, as with the Zero Bubble paper's post-validation
  // of the optimizer step), a step costs the longest span of any device's
  // compute: first start to last end. The Zero Bubble paper's bubble rates
  // are idle / (devices x this).
  double overlapped_step_s = 0;
  double overlapped_bubble_fraction = 0;
  BigVector<double> start_s, end_s;          // per op id
  std::vector<DeviceStats> devices;
  std::vector<LinkStats> links;              // channels in first-use order
  std::vector<int32_t> critical_path;        // op ids, earliest first
  std::vector<int32_t> peak_in_flight;       // per stage: most stashed micro-batches at once
  std::vector<std::vector<std::pair<double, double>>> memory;  // per device: (time, bytes) samples
};

// The schedule must verify. A schedule that cannot progress fails (runtime
// error) naming the blocked ops; the simulator never spins. Uses the in-order
// engine when transfers cannot share bandwidth (per-pair links), the
// event-driven one otherwise, and always the in-order one when comm runs on
// the compute stream (only it runs a device's sends and receives between its
// compute ops).
// What a simulation records beyond the figures (step time, bubble, each
// device's busy time, span and peak, the links' use).
struct SimOptions {
  // The memory samples and the critical path; a caller that wants only the
  // figures (the search) spares writing them. The event-driven engine
  // records them whatever this says.
  bool timeline = true;
};

Result<SimResult> Simulate(const ir::Schedule& schedule, const SimCosts& costs, const SimOptions& options = {});

// A lower bound on the peak of the plan made from a compute-only schedule
// (as ir::BuildShape makes it: no comm, R only where `recompute` inserts
// it) on its fullest device, static bytes included, without simulating:
// each device's compute stream's own memory (a forward's activation, what it
// keeps, a restored one, the I-to-W bytes) walked in program order as the
// engines count it, the received buffers left out.
double ComputeStreamPeak(const ir::Schedule& shape, ir::RecomputeMode recompute, const SimCosts& costs);

// The two engines, for tests that hold one against the other. The in-order
// engine gives every transfer its link's whole bandwidth: exact where no two
// transfers share it, that is per-pair links (Contention::kPerPair), or
// per-device ports (kPerDevice) when comm runs on the compute stream, so
// that a device sends one message at a time. On a host-shared link
// (kHost) with comm on the compute stream it does not model the sharing.
Result<SimResult> SimulateEventDriven(const ir::Schedule& schedule, const SimCosts& costs);
Result<SimResult> SimulateInOrder(const ir::Schedule& schedule, const SimCosts& costs, const SimOptions& options = {});

}  // namespace twinpipe::simulate
