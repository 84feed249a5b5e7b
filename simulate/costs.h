// The simulator's costs for a planned pipeline: per stage the time of each
// compute op kind (summed over the cell's layers by the compute model), the
// optimizer step per device, the link, and the memory each op holds.
//
//   auto plan = partition::PlanFromConfig(config);
//   SimCosts costs = CostsFromPlan(config, *plan);
#pragma once

#include <optional>

#include "cost_models/config.h"
#include "partition/pipeline_plan.h"
#include "simulate/calibration.h"
#include "simulate/engine.h"

namespace twinpipe::simulate {

// With a calibration, its fitted coefficients replace the catalogue's.
SimCosts CostsFromPlan(const cost::Config& config, const partition::Plan& plan, const Calibration* calibration = nullptr);

struct MemoryOverflow {
  int device = 0;
  double peak_bytes = 0, capacity_bytes = 0;
};

// The first device whose predicted peak exceeds its memory, if any.
std::optional<MemoryOverflow> FirstOverflow(const cost::Config& config, const SimResult& result);

}  // namespace twinpipe::simulate
