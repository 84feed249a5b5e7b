// `execute`, `compare`, `import-trace` and `calibrate` from traces as library calls: the plan `execute` runs, what it
// notes before running, the run on a backend, and what `execute --json` and
// `compare --json` print. The program and the Python module both call these.
//
//   execute::ExecuteOptions options = *ExecuteOptionsFor(config, {.steps = 3});
//   cost::Plan plan = *PlanExecution(config, PlanSource{}, nullptr, false);
//   auto run = RunExecution(config, plan, "cpu", options);
//   std::string json = ExecuteJson(config, plan, *run);  // what `execute --json` prints
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/plan_source.h"
#include "cost_models/config.h"
#include "cost_models/plan.h"
#include "execute/runtime.h"
#include "simulate/calibration.h"
#include "ir/result.h"
#include "ir/schedule.h"
#include "traces/compare.h"
#include "traces/torch_profile.h"

namespace twinpipe::api {

struct ExecuteRequest {
  std::string backend = "cpu";     // cpu | cuda
  std::string transport = "auto";  // the cuda backend's (execute/options.h names)
  std::string precision = "fp32";  // the cuda backend's GEMM arithmetic
  int steps = 0;                   // 0: /training/steps
  std::optional<int64_t> seed;     // none: /training/seed
  double timeout_s = 60;           // a receive that waits longer fails the run
};

// The run's options, with the request's seed set in `config`. Bad input: an
// unknown backend, transport or precision, or a transport or precision other
// than the defaults on the cpu backend (it has one transport and computes in
// fp32).
Result<execute::ExecuteOptions> ExecuteOptionsFor(cost::Config& config, const ExecuteRequest& request);

// The plan `execute` runs: as `simulate` plans it from `source`, or
// `schedule` as given (named "the schedule given"). Unless `force`, a plan
// the simulator predicts out of memory is refused before anything is
// allocated (a runtime error naming the device, its peak and its memory).
Result<cost::Plan> PlanExecution(cost::Config& config, const PlanSource& source, const ir::Schedule* schedule,
                                 bool force);

// What `execute` notes before it runs: the cpu backend runs a config of GPUs
// on this machine's CPU.
std::vector<std::string> ExecuteNotes(const cost::Config& config, const std::string& backend);

// The run on `backend` (cpu or cuda).
Result<execute::ExecuteResult> RunExecution(const cost::Config& config, const cost::Plan& plan,
                                            const std::string& backend, const execute::ExecuteOptions& options);

// `execute --json`: the kept step (the lower median, whose trace was
// recorded), with simulate --json's names.
std::string ExecuteJson(const cost::Config& config, const cost::Plan& plan, const execute::ExecuteResult& result);

// Two traces compared op by op (`compare`), named `predicted_name` and
// `measured_name` in an error; CompareJson: its `compare --json`.
Result<traces::Comparison> CompareNamed(const traces::Trace& predicted, const traces::Trace& measured,
                                        const std::string& predicted_name, const std::string& measured_name);
Result<std::string> CompareJson(const traces::Trace& predicted, const traces::Trace& measured,
                                const std::string& predicted_name, const std::string& measured_name);

// `import-trace`: torch.profiler traces (one per rank, .json or .json.gz,
// read from `profiles`) of a step of `schedule`, as a measured trace.
Result<traces::TorchProfileImport> ImportTrace(const std::vector<std::string>& profiles, const ir::Schedule& schedule);
// What `import-trace` says of an import on stderr: the ops timed, by which
// clock, and those torch does not label.
std::string ImportSummary(const traces::TorchProfileImport& import);

// Traces measured with one config's plan.
struct MeasuredGroup {
  cost::Config config;
  std::vector<traces::Trace> traces;
};
// `calibrate` from traces: each group's config planned from `source` as
// `execute` ran it (`warn` gets what a schedule file leaves of a config, as
// the program's warnings), all groups fitted together.
Result<simulate::Calibration> CalibrateTraces(std::vector<MeasuredGroup> groups, const PlanSource& source,
                                              const std::function<void(const std::string&)>& warn);

}  // namespace twinpipe::api
