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
//   PlanCosts costs = UniformCosts(schedule, /*forward_s=*/1e-3, /*backward_s=*/2e-3);
//   Result<SimResult> r = Simulate(schedule, costs);
//   r->step_time_s; r->bubble_fraction;
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "cost_models/config.h"
#include "cost_models/plan_costs.h"
#include "ir/huge_page_allocator.h"
#include "ir/passes.h"
#include "ir/result.h"
#include "ir/schedule.h"

namespace twinpipe::simulate {

using ir::BigVector;

// The costs the engines charge: cost_models/plan_costs.h.
using cost::ComputeSlot;
using cost::PlanCosts;
using cost::UniformCosts;

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

// What a simulation records beyond the figures (step time, bubble, each
// device's busy time, span and peak, the links' use).
struct SimOptions {
  // The memory samples and the critical path; a caller that wants only the
  // figures (the search) spares writing them. The event-driven engine
  // records them whatever this says.
  bool timeline = true;
};

// The schedule must verify. A schedule that cannot progress fails (runtime
// error) naming the blocked ops; the simulator never spins. Picks an engine:
// the in-order one when no two transfers can share bandwidth (every link per
// pair, PlanCosts::Unshared) or when comm runs on the compute stream (only it
// runs a device's sends and receives between its compute ops); otherwise it
// runs the in-order engine first and keeps its result when no two transfers
// on a shared link overlapped in it, and runs the event-driven engine (which
// shares bandwidth between concurrent transfers) when some did. Devices
// sharing a GPU (PlanCosts::gpu) always take the event-driven engine.
Result<SimResult> Simulate(const ir::Schedule& schedule, const PlanCosts& costs, const SimOptions& options = {});

// The two engines, for tests that hold one against the other. The in-order
// engine gives every transfer its link's whole bandwidth: exact where no two
// transfers share it, that is per-pair links (Contention::kPerPair), or
// per-device ports (kPerDevice) when comm runs on the compute stream, so
// that a device sends one message at a time. On a host-shared link
// (kHost) with comm on the compute stream it does not model the sharing.
Result<SimResult> SimulateEventDriven(const ir::Schedule& schedule, const PlanCosts& costs);
Result<SimResult> SimulateInOrder(const ir::Schedule& schedule, const PlanCosts& costs, const SimOptions& options = {});

struct MemoryOverflow {
  int device = 0;
  double peak_bytes = 0, capacity_bytes = 0;
};

// The first device whose predicted peak exceeds its memory, if any.
std::optional<MemoryOverflow> FirstOverflow(const cost::Config& config, const SimResult& result);

}  // namespace twinpipe::simulate
