// The executor: runs a verified schedule on the CPU backend, one worker
// thread per device walking its program in order, and records a measured
// trace in the simulator's format.
//
//   auto plan = partition::PlanFromConfig(config);
//   Result<ExecuteResult> r = ExecuteCpu(config, *plan, {.steps = 3});
//   r->losses.back(); r->trace;
#pragma once

#include <cstdint>
#include <vector>

#include "cost_models/config.h"
#include "ir/result.h"
#include "partition/pipeline_plan.h"
#include "traces/trace.h"

namespace twinpipe::execute {

struct ExecuteOptions {
  int steps = 1;
  double timeout_s = 60;  // a receive that waits longer fails the run
  int32_t fail_op = -1;   // tests: this op id throws, as a failing kernel would
  // Under mpirun: this process is rank r and runs device r only; messages go
  // over MPI, and the result (losses, times, parameters, trace) is assembled
  // on every rank. MPI must be initialised (InitMpi) with one rank per device.
  bool mpi = false;
};

struct ExecuteResult {
  std::vector<double> losses;       // mean loss of each step's mini-batch
  std::vector<double> step_time_s;  // wall time of each step
  std::vector<double> peak_memory_bytes;  // per device, over all steps
  double param_norm = 0;            // L2 norm of every parameter after the last step
  std::vector<float> parameters;    // every parameter after the last step, layer by layer
  traces::Trace trace;              // the step of median time (the lower median); under MPI its
                                    // memory samples are this rank's device's only
};

// The schedule is run as given (the CLI verifies it first). Errors: bad
// input (a model or schedule the backend cannot run) or runtime (a receive
// timed out, a worker failed), naming the op.
Result<ExecuteResult> ExecuteCpu(const cost::Config& config, const partition::Plan& plan,
                                 const ExecuteOptions& options);

}  // namespace twinpipe::execute
