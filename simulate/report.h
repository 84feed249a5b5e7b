// Turning a simulation into what users read: the native trace (the
// schedule's traces::TraceFor, timed by the simulation), the summary table
// and the --json summary (names of DESIGN.md section 7).
//
//   traces::Trace t = ToTrace(schedule, result);
//   std::string j = SummaryJson(schedule, result, /*samples_per_step=*/128);
#pragma once

#include <string>
#include <vector>

#include "ir/schedule.h"
#include "simulate/engine.h"
#include "traces/trace.h"

namespace twinpipe::simulate {

traces::Trace ToTrace(const ir::Schedule& schedule, const SimResult& result, const std::string& source);

// `samples_per_step`: samples trained per step by all replicas together.
// `extrapolation`, when given (a calibration that records its coverage),
// becomes "extrapolation": [...], what the config has outside it ([] inside).
std::string SummaryJson(const ir::Schedule& schedule, const SimResult& result, double samples_per_step,
                        const std::vector<std::string>* extrapolation = nullptr);
std::string SummaryTable(const ir::Schedule& schedule, const SimResult& result, double samples_per_step);

}  // namespace twinpipe::simulate
