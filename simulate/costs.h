// The simulator's costs for a planned pipeline: per stage the time of each
// compute op kind (summed over the cell's layers by the compute model), the
// optimizer step per device, the link, and the memory each op holds.
//
//   auto plan = partition::PlanFromConfig(config);
//   SimCosts costs = CostsFromPlan(config, *plan);
#pragma once

#include <functional>
#include <optional>

#include "cost_models/config.h"
#include "ir/builders.h"
#include "cost_models/plan.h"
#include "simulate/calibration.h"
#include "simulate/engine.h"

namespace twinpipe::simulate {

// With a calibration, its fitted coefficients replace the catalogue's.
SimCosts CostsFromPlan(const cost::Config& config, const cost::Plan& plan, const Calibration* calibration = nullptr);

// The `auto` schedule's problem for a skeleton plan (one stage per device):
// its op times and activation memory from CostsFromPlan, transfers on their
// links, and per stage the memory cap (at most the device's own; 0: that) less its
// parameters, optimizer state and two received boundaries.
ir::AutoProblem AutoProblemFor(const cost::Config& config, const cost::Plan& skeleton,
                               const Calibration* calibration, double memory_cap_bytes);
// The same from costs already taken (CostsFromPlan of the skeleton).
ir::AutoProblem AutoProblemFor(const cost::Config& config, const cost::Plan& skeleton, const SimCosts& costs,
                               double memory_cap_bytes);
// The cap AutoScheduler(_, memory_cap_bytes) plans to (0: the devices').
double AutoMemoryCap(const cost::Config& config, double memory_cap_bytes);

// partition::PlanOverrides::build_auto with this cost model, planning to
// `memory_cap_bytes` (0: the config's /pipeline/memory_cap, or the devices').
std::function<Result<ir::Schedule>(const cost::Config&, const cost::Plan&)> AutoScheduler(
    const Calibration* calibration, double memory_cap_bytes);

struct MemoryOverflow {
  int device = 0;
  double peak_bytes = 0, capacity_bytes = 0;
};

// The first device whose predicted peak exceeds its memory, if any.
std::optional<MemoryOverflow> FirstOverflow(const cost::Config& config, const SimResult& result);

}  // namespace twinpipe::simulate
