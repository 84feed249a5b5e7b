// The executor: runs a verified schedule on the CPU or CUDA backend, one
// worker thread per device of every data-parallel replica walking its
// program in order (walker.h), and records a measured trace in the
// simulator's format.
//
//   auto plan = partition::PlanFromConfig(config);
//   Result<ExecuteResult> r = ExecuteCpu(config, *plan, {.steps = 3});
//   r->losses.back(); r->trace;
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cost_models/config.h"
#include "execute/options.h"
#include "ir/result.h"
#include "cost_models/plan.h"
#include "traces/trace.h"

namespace twinpipe::execute {

struct ExecuteOptions {
  int steps = 1;
  double timeout_s = 60;  // a receive that waits longer fails the run
  int32_t fail_op = -1;   // tests: this op id throws, as a failing kernel would
  // Under mpirun: this process is rank r and runs cluster device r only
  // (replica r / D's pipeline device r mod D); messages and all-reduces go
  // over MPI, and the result (losses, times, parameters, trace) is assembled
  // on every rank. The world must have one rank per cluster device (D x R).
  bool mpi = false;
  int local_rank = 0;  // under MPI: this rank's index on its node (MpiWorld::local_rank), which picks its GPU
  // The CUDA backend: how stages on different devices exchange tensors and
  // the GEMM arithmetic (execute/options.h).
  TransportKind transport = TransportKind::kAuto;
  Precision precision = Precision::kFp32;
  // Tests: how each local worker's step ended when it ended in an error,
  // told from that worker's thread: its cluster device and the error (kind
  // kAborted: stopped because another part of the run failed first).
  std::function<void(int device, const Error& error)> on_worker_error;
  // Called after each step that ends well (1-based step, its mean loss and
  // wall time), on the thread that called Execute*: for progress.
  std::function<void(int step, double loss, double seconds)> on_step;
};

struct ExecuteResult {
  std::vector<double> losses;       // mean loss of each step's mini-batch
  std::vector<double> step_time_s;  // wall time of each step
  std::vector<double> peak_memory_bytes;  // per cluster device (replica r's device d at r * D + d), over all steps
  double param_norm = 0;            // L2 norm of every parameter after the last step
  std::vector<float> parameters;    // every parameter after the last step, layer by layer
  std::vector<double> state;        // what layers keep untrained (batchnorm's running mean, then
                                    // variance), after the last step, layer by layer
  traces::Trace trace;              // replica 0 in the step of median time (the lower median); under
                                    // MPI its memory samples are this rank's device's only
  // CUDA: the stream-ordered allocator's high-water mark per device (the
  // GPU's, shared by the devices placed on one GPU), to hold the accounted
  // peak against; and the link each device pair used ("0->1 p2p", ...).
  std::vector<double> allocator_peak_bytes;
  // CUDA: the GPU's used memory at the end of the last step by
  // cudaMemGetInfo (context, libraries and pool included): the outer bound.
  std::vector<double> device_used_bytes;
  std::vector<std::string> links;
};

// The schedule is run as given (the CLI verifies it first). Errors: bad
// input (a model or schedule the backend cannot run) or runtime (a receive
// timed out, a worker failed), naming the op.
Result<ExecuteResult> ExecuteCpu(const cost::Config& config, const cost::Plan& plan,
                                 const ExecuteOptions& options);

// The CUDA backend (execute/cuda/): the same schedule on GPUs, device d on
// GPU d mod the GPUs there are (under MPI, the rank's local GPU). Runtime
// error when this twinpipe was built without CUDA or no GPU is present.
Result<ExecuteResult> ExecuteCuda(const cost::Config& config, const cost::Plan& plan,
                                  const ExecuteOptions& options);

// What both backends share (see walker.h for the walk itself).
// The step a result's trace is of: the lower median of the step times.
size_t MedianStep(const std::vector<double>& step_time_s);
// The executor's own share of that step and its idle time:
// (step time - the busiest stream's summed op time) / step time.
double ExecutorOverhead(const ExecuteResult& result);
// The trace of the step of median time: the schedule's traces::TraceFor with
// that step's events and memory.
traces::Trace MedianStepTrace(std::string source, const ir::Schedule& schedule, const std::vector<double>& step_time_s,
                              std::vector<std::vector<traces::Event>>& step_events,
                              std::vector<std::vector<std::vector<traces::MemorySample>>>& step_memory);
// Under MPI, after a step on cluster device `rank` (each rank's own entries
// filled, zeros elsewhere): every rank gets the summed losses and peaks, the
// slowest rank's step time and replica 0's events.
void GatherStepAcrossRanks(const ir::Schedule& schedule, int rank, std::vector<double>& loss_sum, double& step_time_s,
                           std::vector<double>& peaks, std::vector<traces::Event>& events);

}  // namespace twinpipe::execute
