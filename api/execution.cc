#include "api/execution.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cost_models/plan_costs.h"
#include "execute/gemm.h"
#include "ir/name_table.h"
#include "ir/units.h"
#include "api/schedule_io.h"
#include "partition/pipeline_plan.h"
#include "simulate/engine.h"
#include "traces/compare.h"

namespace twinpipe::api {

Result<execute::ExecuteOptions> ExecuteOptionsFor(cost::Config& config, const ExecuteRequest& r) {
  if (r.backend != "cpu" && r.backend != "cuda") {
    return Fail(fmt::format("backend '{}': expected cpu or cuda", r.backend));
  }
  const auto transport = execute::TransportFromName(r.transport);
  if (!transport) {
    return Fail(fmt::format("transport '{}': expected one of {}", r.transport,
                            fmt::join(ir::Names(execute::kTransportNames), ", ")));
  }
  const auto precision = execute::PrecisionFromName(r.precision);
  if (!precision) {
    return Fail(fmt::format("precision '{}': expected one of {}", r.precision,
                            fmt::join(ir::Names(execute::kPrecisionNames), ", ")));
  }
  if (r.backend == "cpu" && (*transport != execute::TransportKind::kAuto || *precision != execute::Precision::kFp32)) {
    return Fail(
        "--transport and --precision choose how the cuda backend runs; the cpu backend has one transport and computes "
        "in fp32");
  }
  if (r.steps < 0 || r.steps > (1 << 24)) {
    return Fail(fmt::format("steps {}: expected a count of steps in [1, 16777216] (0: /training/steps)", r.steps));
  }
  if (r.seed && (*r.seed < 0 || *r.seed > (int64_t{1} << 62))) {
    return Fail(fmt::format("seed {}: expected a number in [0, 2^62]", *r.seed));
  }
  if (!(r.timeout_s >= 0.001 && r.timeout_s <= 1e6)) {
    return Fail(fmt::format("timeout {} s: expected seconds, a number in [0.001, 1000000]", r.timeout_s));
  }
  if (r.seed) config.training.seed = *r.seed;
  execute::ExecuteOptions options{r.steps > 0 ? r.steps : config.training.steps, r.timeout_s};
  options.transport = *transport;
  options.precision = *precision;
  return options;
}

Result<cost::Plan> PlanExecution(cost::Config& config, const PlanSource& source, const ir::Schedule* schedule,
                                 bool force) {
  auto plan = PlanOf(config, source, schedule, "the schedule given", nullptr);
  if (!plan || force) return plan;
  // The simulator's peak against the catalogue's capacity, before anything is allocated.
  auto sim = simulate::Simulate(plan->schedule, cost::CostsFromPlan(config, *plan));
  if (auto over = sim ? simulate::FirstOverflow(config, *sim) : std::nullopt) {
    return FailRuntime(fmt::format("device {} is predicted to need {} at peak but holds {}; not run (--force runs it "
                                   "anyway)",
                                   over->device, Bytes(over->peak_bytes), Bytes(over->capacity_bytes)));
  }
  return plan;
}

std::vector<std::string> ExecuteNotes(const cost::Config& config, const std::string& backend) {
  if (backend != "cpu") return {};
  std::vector<std::string> notes;
  std::vector<std::string> kinds;
  for (const cost::Device& d : config.cluster.devices) {
    if (d.name != "CPU" && std::find(kinds.begin(), kinds.end(), d.name) == kinds.end()) kinds.push_back(d.name);
  }
  if (!kinds.empty()) {
    notes.push_back(fmt::format("the config's devices are {}: the cpu backend runs each as threads on this machine's "
                                "CPU, so the times it measures are this CPU's (--backend cuda runs on GPUs)",
                                fmt::join(kinds, ", ")));
  }
  if (std::string blas = execute::BlasCoreNote(); !blas.empty()) notes.push_back(std::move(blas));
  return notes;
}

Result<execute::ExecuteResult> RunExecution(const cost::Config& config, const cost::Plan& plan,
                                            const std::string& backend, const execute::ExecuteOptions& options) {
  return backend == "cuda" ? execute::ExecuteCuda(config, plan, options) : execute::ExecuteCpu(config, plan, options);
}

std::string ExecuteJson(const cost::Config& config, const cost::Plan& plan, const execute::ExecuteResult& result) {
  const double step = result.step_time_s[execute::MedianStep(result.step_time_s)];
  const traces::TraceSummary kept = traces::Summarize(result.trace);  // as compare reads the same trace
  const double samples = static_cast<double>(config.training.batch) * plan.schedule.replicas;
  nlohmann::ordered_json j;
  j["losses"] = result.losses;
  j["final_loss"] = result.losses.back();
  j["param_norm"] = result.param_norm;
  j["step_time_s"] = step;
  j["throughput_samples_per_s"] = step > 0 ? samples / step : 0.0;
  j["bubble_fraction"] = kept.bubble_fraction;
  j["executor_overhead"] = execute::ExecutorOverhead(result);
  j["devices"] = nlohmann::ordered_json::array();
  for (size_t d = 0; d < result.peak_memory_bytes.size(); ++d) {
    nlohmann::ordered_json dev{{"device", d}};
    if (d < kept.busy_s.size()) dev["busy_s"] = kept.busy_s[d];  // replica 0's devices
    dev["peak_memory_bytes"] = result.peak_memory_bytes[d];
    if (d < result.allocator_peak_bytes.size()) dev["allocator_peak_bytes"] = result.allocator_peak_bytes[d];
    if (d < result.device_used_bytes.size()) dev["device_used_bytes"] = result.device_used_bytes[d];
    j["devices"].push_back(dev);
  }
  j["links"] = nlohmann::ordered_json::array();
  for (const auto& l : kept.links) {
    j["links"].push_back({{"src", l.src}, {"dst", l.dst}, {"bytes", l.bytes}, {"busy_s", l.busy_s}});
  }
  if (!result.links.empty()) j["transports"] = result.links;
  return j.dump(2) + "\n";
}

Result<traces::Comparison> CompareNamed(const traces::Trace& predicted, const traces::Trace& measured,
                                        const std::string& predicted_name, const std::string& measured_name) {
  auto c = traces::Compare(predicted, measured);
  if (!c) return Fail(fmt::format("{} vs {}: {}", predicted_name, measured_name, c.error().message));
  return c;
}

Result<std::string> CompareJson(const traces::Trace& predicted, const traces::Trace& measured,
                                const std::string& predicted_name, const std::string& measured_name) {
  auto c = CompareNamed(predicted, measured, predicted_name, measured_name);
  if (!c) return tl::unexpected(c.error());
  return traces::ComparisonJson(*c);
}

Result<traces::TorchProfileImport> ImportTrace(const std::vector<std::string>& profiles, const ir::Schedule& schedule) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const std::string& path : profiles) {
    auto bytes = ReadFile(path);
    if (!bytes) return tl::unexpected(bytes.error());
    files.emplace_back(path, std::move(*bytes));
  }
  return traces::ImportTorchProfiles(files, schedule);
}

std::string ImportSummary(const traces::TorchProfileImport& m) {
  return fmt::format("{} of the schedule's {} ops timed ({} time{}), {} not labelled by torch (STEP, and the "
                     "transfers of single-stage schedules); {} bookkeeping actions skipped",
                     m.measured, m.measured + m.unmeasured, m.gpu_time ? "GPU" : "CPU",
                     m.no_gpu_work ? fmt::format("; {} launched no GPU work: no time", m.no_gpu_work) : "",
                     m.unmeasured, m.bookkeeping);
}

Result<simulate::Calibration> CalibrateTraces(std::vector<MeasuredGroup> groups, const PlanSource& source,
                                              const std::function<void(const std::string&)>& warn) {
  std::vector<cost::Plan> plans;
  plans.reserve(groups.size());  // MeasuredRuns point into it
  for (MeasuredGroup& g : groups) {
    auto plan = MakePlan(g.config, source);
    if (!plan) return tl::unexpected(plan.error());
    for (const std::string& w : ScheduleFileWarnings(source, g.config, plan->schedule)) warn(w);
    plans.push_back(std::move(*plan));
  }
  std::vector<simulate::MeasuredRuns> runs;
  for (size_t i = 0; i < groups.size(); ++i) runs.push_back({&groups[i].config, &plans[i], std::move(groups[i].traces)});
  return simulate::FitCalibration(runs);
}

}  // namespace twinpipe::api
