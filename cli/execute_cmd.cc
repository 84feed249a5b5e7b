// `twinpipe execute`: train the config's model for some steps with the very
// schedule `simulate` predicts, on the CPU or the CUDA backend, and record a
// measured trace.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "api/execution.h"
#include "cli/commands.h"
#include "cli/fail.h"
#include "cli/plan_source.h"
#include "cli/schedule_io.h"
#include "cost_models/config.h"
#include "execute/mpi.h"
#include "execute/runtime.h"
#include "ir/name_table.h"
#include "ir/units.h"
#include "cost_models/plan_costs.h"
#include "simulate/engine.h"
#include "partition/pipeline_plan.h"
#include "traces/compare.h"
#include "traces/trace.h"

namespace twinpipe::cli {
namespace {

struct ExecuteCmdOptions {
  std::string config;
  std::string backend = "cpu";
  std::string transport = "auto";  // names checked against execute/options.h, converted once in Run
  std::string precision = "fp32";
  PlanSource source;
  int steps = 0;
  int64_t seed = -1;
  double timeout_s = 60;
  bool json = false;
  bool force = false;
  std::string trace;
  std::string chrome;
};

// An option's names, for CLI11 to check (execute/options.h lists them once).
using ir::Names;

// Started by mpirun (or another MPI launcher), as its environment says.
bool LaunchedByMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

// Progress on stderr once the run has taken a second: a line updated in
// place on a terminal, a line a step in a log.
class StepProgress {
 public:
  explicit StepProgress(int steps) : steps_(steps), start_(std::chrono::steady_clock::now()) {}

  void Report(int step, double loss, double seconds) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < 1) return;
    const bool terminal = isatty(STDERR_FILENO);
    open_ = terminal && step < steps_;
    fmt::print(stderr, "{}execute: step {}/{}, loss {:.6g}, {:.3f} s ({:.1f} s in all){}", terminal ? "\r" : "",
               step, steps_, loss, seconds, elapsed, open_ ? "" : "\n");
  }

  // Ends a terminal's line still waiting for its newline (before a failure's message).
  void EndLine() {
    if (open_) fmt::print(stderr, "\n");
    open_ = false;
  }

 private:
  int steps_;
  std::chrono::steady_clock::time_point start_;
  bool open_ = false;
};

int Run(const ExecuteCmdOptions& o) {
  auto report = ReportStream({{"--trace", o.trace}, {"--chrome", o.chrome}});
  if (!report) return Fail("execute", report.error());
  auto config = cost::LoadConfigFile(o.config);
  if (!config) return Fail("execute", config.error());
  const api::ExecuteRequest request{.backend = o.backend, .transport = o.transport, .precision = o.precision,
                                    .steps = o.steps,
                                    .seed = o.seed >= 0 ? std::optional<int64_t>(o.seed) : std::nullopt,
                                    .timeout_s = o.timeout_s};
  auto run_options = api::ExecuteOptionsFor(*config, request);
  if (!run_options) return Fail("execute", run_options.error());
  execute::ExecuteOptions options = *run_options;
  auto plan = api::PlanExecution(*config, o.source, nullptr, o.force);
  if (!plan) return Fail("execute", plan.error());
  // Under mpirun: one rank per cluster device (D x R), rank 0 reports.
  int rank = 0;
  if (LaunchedByMpi()) {
    auto world = execute::InitMpi();
    if (!world) {
      const int code = Fail("execute", {world.error().message, ErrorKind::kRuntime});
      execute::AbortMpi(code);
      return code;
    }
    const int devices = plan->schedule.num_devices * std::max(1, plan->schedule.replicas);
    if (world->size != devices) {
      if (world->rank == 0) {
        fmt::print(stderr, "twinpipe execute: {} ranks, but the schedule runs on {} devices{}: start one rank per "
                           "device (mpirun -np {})\n", world->size, devices,
                   plan->schedule.replicas > 1 ? fmt::format(" ({} x {} replicas)", plan->schedule.num_devices,
                                                             plan->schedule.replicas)
                                               : "",
                   devices);
      }
      execute::FinalizeMpi();
      return kExitBadInput;
    }
    options.mpi = true;
    options.local_rank = world->local_rank;
    rank = world->rank;
  }
  StepProgress progress(options.steps);
  if (rank == 0) {
    WarnScheduleFile("execute", o.source, *config, plan->schedule);
    for (const std::string& note : api::ExecuteNotes(*config, o.backend)) {
      fmt::print(stderr, "twinpipe execute: note: {}\n", note);
    }
    options.on_step = [&progress](int step, double loss, double seconds) { progress.Report(step, loss, seconds); };
  }
  auto result = api::RunExecution(*config, *plan, o.backend, options);
  if (!result) {
    progress.EndLine();
    const int code = Fail("execute", {fmt::format("{}{}", options.mpi ? fmt::format("rank {}: ", rank) : "",
                                                  result.error().message),
                                      result.error().kind});
    if (options.mpi) execute::AbortMpi(code);  // the other ranks would wait for this one
    return code;
  }
  if (options.mpi) execute::FinalizeMpi();
  if (rank != 0) return kExitOk;
  for (const auto& [path, write] : {std::pair{o.trace, &traces::WriteTraceJson},
                                    std::pair{o.chrome, &traces::WriteChromeTrace}}) {
    if (path.empty()) continue;
    if (auto ok = WriteOutput(path, write(result->trace)); !ok) return Fail("execute", ok.error());
  }
  if (o.json) {
    fmt::print(*report, "{}", api::ExecuteJson(*config, *plan, *result));
    return kExitOk;
  }
  // The kept step (the lower median, whose trace was recorded).
  const double step = result->step_time_s[execute::MedianStep(result->step_time_s)];
  for (size_t i = 0; i < result->losses.size(); ++i) {
    fmt::print(*report, "step {:>4}  loss {:.6f}  time {:.3f} ms\n", i + 1, result->losses[i], result->step_time_s[i] * 1e3);
  }
  fmt::print(*report, "parameter norm {:.6f}; median step {:.3f} ms (executor overhead {:.1f}%); peak memory per device:",
             result->param_norm, step * 1e3, 100 * execute::ExecutorOverhead(*result));
  for (double b : result->peak_memory_bytes) fmt::print(*report, " {}", Bytes(b));
  fmt::print(*report, "\n");
  if (!result->links.empty()) fmt::print(*report, "links: {}\n", fmt::join(result->links, ", "));
  return kExitOk;
}

}  // namespace

void AddExecute(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ExecuteCmdOptions>();
  CLI::App* cmd = app.add_subcommand("execute", "Train with the schedule for some steps and record a measured trace");
  cmd->add_option("config", o->config, "config JSON")->required();
  cmd->add_option("--backend", o->backend, "cpu, or cuda (GPUs: device d on GPU d mod the GPUs there are)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--transport", o->transport, "cuda: how devices exchange tensors (auto picks local on one GPU, "
                                               "p2p or host-staged between GPUs, nccl between MPI ranks)")
      ->check(CLI::IsMember(Names(execute::kTransportNames)));
  cmd->add_option("--precision", o->precision, "cuda: GEMM arithmetic")->check(CLI::IsMember(Names(execute::kPrecisionNames)));
  cmd->add_option("--steps", o->steps, "training steps (default: training.steps)")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--seed", o->seed, "seed for weights and data (default: training.seed)")->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  cmd->add_option("--timeout", o->timeout_s, "seconds a receive may wait before the run fails")->check(SecondsValidator(0.001, 1e6));
  AddPlanOptions(*cmd, o->source);
  cmd->add_flag("--force", o->force, "run even when the simulator predicts a device will run out of memory");
  cmd->add_flag("--json", o->json, "print losses[], final_loss, param_norm, and the kept step's step_time_s, "
                                   "throughput_samples_per_s, bubble_fraction, devices[] and links[] (as simulate "
                                   "--json names them)");
  cmd->add_option("--trace", o->trace, "write the measured trace of the median step (native JSON)");
  cmd->add_option("--chrome", o->chrome, "write it as a Chrome / Perfetto trace");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace twinpipe::cli
