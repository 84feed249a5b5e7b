// Fitting a calibration (cost_models/calibration.h) to measured traces: per
// op kind (F, B, I, W, R) a scale on each layer kind's predicted roofline
// time plus a fixed overhead per op; the link's latency and bandwidth from
// its transfers; the optimizer step's overhead and time per parameter.
// (A device profile fitted to a table of runs: simulate/runs.h.)
//
//   Result<Calibration> cal = FitCalibration(config, plan, {measured});
//   std::string json = cost::WriteCalibration(*cal);
#pragma once

#include <vector>

#include "cost_models/calibration.h"
#include "cost_models/config.h"
#include "ir/result.h"
#include "cost_models/plan.h"
#include "traces/trace.h"

namespace twinpipe::simulate {

// The calibration's data, file and op times live in cost_models/.
using cost::Calibration;
using cost::OpFit;
using cost::ProfileFit;

// Traces measured with one config's plan.
struct MeasuredRuns {
  const cost::Config* config = nullptr;
  const cost::Plan* plan = nullptr;
  std::vector<traces::Trace> traces;
};

// Fits from traces measured with `plan` (every trace must be of its stages
// and micro-batches). Fails (bad input) when a trace does not fit the plan.
Result<Calibration> FitCalibration(const cost::Config& config, const cost::Plan& plan,
                                   const std::vector<traces::Trace>& measured);
// Fits one calibration to runs of several configs of one device kind (bad
// input otherwise). Runs of different micro-batch sizes tell a fixed cost
// per op (launches) from a cost per sample, which one size cannot.
Result<Calibration> FitCalibration(const std::vector<MeasuredRuns>& runs);

}  // namespace twinpipe::simulate
