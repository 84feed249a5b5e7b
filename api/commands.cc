#include "api/commands.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cost_models/coverage.h"
#include "cost_models/plan_costs.h"
#include "ir/builders.h"
#include "ir/name_table.h"
#include "ir/pipeline.h"
#include "ir/units.h"
#include "partition/pipeline_plan.h"
#include "api/schedule_io.h"
#include "simulate/report.h"

namespace twinpipe::api {

Result<Simulation> RunSimulation(cost::Config config, const PlanSource& source,
                                 const simulate::Calibration* calibration, const ir::Schedule* schedule,
                                 const std::string& schedule_source) {
  Result<cost::Plan> plan = PlanOf(config, source, schedule, schedule_source, calibration);
  if (!plan) return tl::unexpected(plan.error());
  Simulation s{.config = std::move(config), .plan = std::move(*plan)};
  // What the config has outside the runs the calibration was fitted on.
  if (calibration && calibration->coverage) s.extrapolation = cost::Extrapolations(*calibration->coverage, s.config);
  const simulate::PlanCosts costs = cost::CostsFromPlan(s.config, s.plan, calibration);
  auto result = simulate::Simulate(s.plan.schedule, costs);
  if (!result) return tl::unexpected(result.error());
  s.result = std::move(*result);
  s.samples_per_step = static_cast<double>(s.config.training.batch) * s.plan.schedule.replicas;
  return s;
}

std::string SimulateJson(const Simulation& s) {
  return simulate::SummaryJson(s.plan.schedule, s.result, s.samples_per_step,
                               s.extrapolation ? &*s.extrapolation : nullptr);
}

traces::Trace SimulationTrace(const Simulation& s) {
  traces::Trace trace = simulate::ToTrace(s.plan.schedule, s.result, "simulate");
  trace.tensor_parallel = s.config.pipeline.tensor_parallel;
  return trace;
}

std::optional<std::string> OverflowMessage(const Simulation& s) {
  auto over = simulate::FirstOverflow(s.config, s.result);
  if (!over) return std::nullopt;
  return fmt::format("device {} is predicted to run out of memory: peak {}, capacity {}", over->device,
                     GiB(over->peak_bytes), GiB(over->capacity_bytes));
}

Result<ir::Schedule> BuildSchedule(const cost::Config* config, ScheduleRequest r) {
  auto recompute_error = [&] {
    return Fail(fmt::format("recompute '{}': expected none, full, except-last or selective", r.recompute));
  };
  if (config) {
    // The config's plan sizes the transfers and counts the replicas.
    if (r.activation_bytes != 0 || r.replicas != 1) {
      return Fail("activation bytes and replicas are for a schedule built without a CONFIG: the config's plan "
                  "sizes each transfer from its model and takes its replicas from /cluster/devices");
    }
    // Planned as simulate and execute plan it, overrides and all.
    cost::Config planned = *config;
    PlanSource source;
    source.schedule = r.schedule;
    source.recompute = r.recompute;
    source.chunks = r.chunks;
    auto plan = MakePlan(planned, source);
    if (!plan) return tl::unexpected(plan.error());
    return std::move(plan->schedule);
  }
  // What the command line's ranges hold, for callers without them (the
  // Python module); 0 is the command line's "not given".
  if (r.stages < 0) return Fail(fmt::format("stages: expected at least 1, got {}", r.stages));
  if (r.micro_batches < 0) return Fail(fmt::format("micro-batches: expected at least 1, got {}", r.micro_batches));
  if (r.stages == 0 || r.micro_batches == 0) return Fail("give a CONFIG, or both --stages and --microbatches");
  if (r.activation_bytes < 0) {
    return Fail(fmt::format("activation bytes: expected 0 or more, got {}", r.activation_bytes));
  }
  if (r.replicas < 1) return Fail(fmt::format("replicas: expected at least 1, got {}", r.replicas));
  if (r.schedule.empty()) r.schedule = "gpipe";
  if (r.recompute.empty()) r.recompute = "none";
  if (r.schedule == ir::kAutoSchedule) return Fail("auto needs a CONFIG: its order comes from the model's op costs");
  auto built = ir::BuildByName(r.schedule, r.stages, r.micro_batches, r.chunks);
  if (!built) return tl::unexpected(built.error());
  auto mode = ir::RecomputeModeFromName(r.recompute);
  if (!mode) return recompute_error();
  auto timing = ir::RecomputeTimingFromName(r.recompute_timing);
  if (!timing) {
    return Fail(fmt::format("recompute timing '{}': expected overlapped or in-backward", r.recompute_timing));
  }
  ir::Schedule s = std::move(*built);
  s.replicas = r.replicas;
  const std::vector<int64_t> boundary(std::max(0, s.num_stages - 1), r.activation_bytes);
  if (auto ok = ir::CompletePipeline(s, {.recompute = *mode,
                                          .recompute_timing = *timing,
                                          .comm = {boundary, boundary},
                                          .what = fmt::format("the built {} schedule", r.schedule)});
      !ok) {
    return tl::unexpected(Error{"internal error: " + ok.error().message, ok.error().kind});
  }
  return s;
}

std::map<int, std::vector<std::string>> RunExtrapolations(const std::vector<simulate::Run>& runs,
                                                          std::span<const simulate::Calibration* const> calibrations) {
  std::map<int, std::vector<std::string>> outside;
  for (const simulate::Run& r : runs) {
    const simulate::Calibration* calibration = simulate::CalibrationFor(r, calibrations);
    if (!calibration || !calibration->coverage) continue;
    auto lines = cost::Extrapolations(*calibration->coverage, r.config);
    if (!lines.empty()) outside[r.line] = std::move(lines);
  }
  return outside;
}

std::string ValidateJson(const simulate::Validation& v, const std::map<int, std::vector<std::string>>* outside) {
  nlohmann::ordered_json j;
  j["runs"] = v.rows.size();
  j["mape"] = v.mape;
  j["bias"] = v.bias;
  if (outside) j["extrapolated_runs"] = outside->size();
  if (!v.uncalibrated.empty()) j["uncalibrated_runs"] = v.uncalibrated.size();
  j["groups"] = nlohmann::ordered_json::array();
  for (const auto& g : v.groups) {
    j["groups"].push_back({{"key", g.key}, {"value", g.value}, {"runs", g.runs}, {"mape", g.mape}, {"bias", g.bias}});
  }
  // The means over no sets are null, not a growth of 0.
  const auto mean = [&](double growth) {
    return v.scaling.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(growth);
  };
  j["scaling"] = {{"measured_growth", mean(v.scaling_measured)}, {"predicted_growth", mean(v.scaling_predicted)},
                  {"sets", nlohmann::ordered_json::array()}};
  for (const auto& g : v.scaling) {
    j["scaling"]["sets"].push_back({{"runs", g.runs},
                                    {"fewest", {{"line", g.fewest.line}, {"gpus", g.fewest_gpus}}},
                                    {"most", {{"line", g.most.line}, {"gpus", g.most_gpus}}},
                                    {"measured_growth", g.measured_growth},
                                    {"predicted_growth", g.predicted_growth}});
  }
  // The ten worst, then every run in table order (a study over the
  // predictions, as scripts/fp8_ratio.py makes, reads them here).
  for (const auto& [key, list] : {std::pair{"worst", &v.worst}, std::pair{"rows", &v.rows}}) {
    j[key] = nlohmann::ordered_json::array();
    for (const auto& w : *list) {
      j[key].push_back({{"line", w.line}, {"measured_s", w.measured_s}, {"predicted_s", w.predicted_s},
                        {"error", w.error}});
      if (outside) {  // [] inside the calibration's coverage
        auto why = outside->find(w.line);
        j[key].back()["extrapolated"] = why != outside->end() ? why->second : std::vector<std::string>{};
      }
      if (!v.uncalibrated.empty()) {
        j[key].back()["calibrated"] = !std::binary_search(v.uncalibrated.begin(), v.uncalibrated.end(), w.line);
      }
    }
  }
  return j.dump(2) + "\n";
}

nlohmann::ordered_json CandidateJson(const search::Candidate& c) {
  return {{"tensor_parallel", c.tensor_parallel},
          {"sequence_parallel", c.sequence_parallel},
          {"stages", c.stages},
          {"replicas", c.replicas},
          {"micro_batches", c.micro_batches},
          {"schedule", c.schedule},
          {"chunks", c.chunks},
          {"recompute", std::string(ir::RecomputeModeName(c.recompute))},
          {"partition", std::string(cost::PartitionAlgorithmName(c.partition))},
          {"batch_per_replica", c.batch},
          {"step_time_s", c.step_time_s},
          {"throughput_samples_per_s", c.throughput},
          {"bubble_fraction", c.bubble_fraction},
          {"peak_memory_bytes", c.peak_memory_bytes},
          {"context_parallel", c.context_parallel},
          {"expert_parallel", c.expert_parallel},
          {"data_parallel_sharding", std::string(ir::NameOf(cost::kDataParallelShardingNames, c.sharding))},
          {"tp_comm_overlap", c.tp_comm_overlap}};
}

std::string SearchJson(const search::SearchResult& result, const nlohmann::ordered_json& best_config) {
  nlohmann::ordered_json j;
  j["configs_evaluated"] = result.configs_evaluated;
  j["configs_simulated"] = result.configs_simulated;
  j["configs_skipped_on_bounds"] = result.configs_bounded;
  j["over_memory_cap"] = result.over_cap;
  j["wall_s"] = result.wall_s;
  j["pareto"] = nlohmann::ordered_json::array();
  for (const auto& c : result.pareto) j["pareto"].push_back(CandidateJson(c));
  j["best"] = result.best ? best_config : nlohmann::ordered_json();
  if (result.best) j["best_prediction"] = CandidateJson(*result.best);
  return j.dump(2) + "\n";
}

Result<bool> ApplySearchKnobs(const SearchKnobs& k, search::SearchOptions& options) {
  for (const auto& [name, value] : {std::pair{"max_context_parallel", k.max_context_parallel},
                                     std::pair{"min_context_tokens", k.min_context_tokens},
                                     std::pair{"max_chunks", k.max_chunks}}) {
    if (value < 0) return Fail(fmt::format("{} {}: expected 0 (no limit) or more", name, value));
  }
  if (k.shardings.empty()) return Fail("sharding: expected one mode at least (none, optimizer, full)");
  std::vector<cost::DataParallelSharding> shardings;
  for (const std::string& name : k.shardings) {
    const auto mode = ir::FromName(cost::kDataParallelShardingNames, name);
    if (!mode) return Fail(fmt::format("sharding '{}': expected none, optimizer or full", name));
    shardings.push_back(*mode);
  }
  if (k.tp_comm_overlap != "off" && k.tp_comm_overlap != "on" && k.tp_comm_overlap != "both") {
    return Fail(fmt::format("tp_comm_overlap '{}': expected off, on or both", k.tp_comm_overlap));
  }
  options.max_context_parallel = k.max_context_parallel;
  options.min_context_tokens = k.min_context_tokens;
  options.shardings = std::move(shardings);
  options.tp_comm_overlap = k.tp_comm_overlap == "both" ? std::vector<bool>{false, true}
                                                        : std::vector<bool>{k.tp_comm_overlap == "on"};
  options.max_chunks = k.max_chunks;
  return true;
}

std::string MaxLayersJson(const cost::Config& config, const std::vector<search::MaxLayersRow>& rows) {
  nlohmann::ordered_json j;
  j["schedule"] = config.pipeline.schedule;
  j["micro_batches"] = config.training.micro_batches;
  j["rows"] = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    j["rows"].push_back({{"stages", r.stages},
                         {"recompute", std::string(ir::RecomputeModeName(r.recompute))},
                         {"max_layers", r.max_layers},
                         {"peak_memory_bytes", r.peak_memory_bytes}});
  }
  return j.dump(2) + "\n";
}

Result<partition::LaunchSettings> ExportSettings(const cost::Config& config, const std::string& config_source,
                                                 const std::string& framework, const std::string& schedule_csv) {
  if (framework != "megatron" && framework != "torchtitan") {
    return Fail(fmt::format("framework '{}': expected megatron or torchtitan", framework));
  }
  if (framework == "megatron") {
    if (!schedule_csv.empty()) return Fail("--schedule-csv is for torchtitan (Megatron-LM runs its own schedules)");
    return partition::MegatronSettings(config);
  }
  if (!schedule_csv.empty()) {
    auto loaded = LoadSchedule(schedule_csv, "torch-csv", "auto");
    if (!loaded) return tl::unexpected(loaded.error());
    const ir::Schedule& s = loaded->schedule;
    const int stages = config.pipeline.stages * config.pipeline.Chunks();
    if (s.num_devices != config.pipeline.stages || s.num_stages != stages ||
        s.num_micro_batches != config.training.micro_batches) {
      return Fail(fmt::format("--schedule-csv {}: has {} ranks, {} stages and {} micro-batches; {} plans {} devices, "
                               "{} stages and {} micro-batches (/pipeline/stages, /pipeline/chunks, "
                               "/training/microbatches)",
                               schedule_csv, s.num_devices, s.num_stages, s.num_micro_batches, config_source,
                               config.pipeline.stages, stages, config.training.micro_batches));
    }
  }
  return partition::TorchtitanSettings(config, {.schedule_csv = schedule_csv});
}

Result<partition::PartitionReport> PartitionConfig(const cost::Config& config, const std::string& algorithm) {
  cost::PartitionAlgorithm chosen = config.pipeline.partition;
  if (!algorithm.empty()) {
    const auto named = cost::PartitionAlgorithmFromName(algorithm);
    if (!named) {
      return Fail(fmt::format("partition algorithm '{}': expected one of {}", algorithm,
                              fmt::join(ir::Names(cost::kPartitionAlgorithmNames), ", ")));
    }
    chosen = *named;
  }
  // Cut as `simulate` plans it: a schedule of several stages a device
  // (interleaved, zb-v, dualpipev) into its stages, each cell's device the
  // one its stage runs on; the auto schedule's cells hold the peaks of the
  // order its builder chooses.
  cost::Config use = config;
  use.pipeline.partition = chosen;
  auto plan = partition::PlanFromConfig(use);
  if (!plan) return tl::unexpected(plan.error());
  return std::move(plan->partition);
}

std::vector<std::string> PartitionNotes(const cost::Config& config, const std::string& algorithm,
                                        const partition::PartitionReport& report) {
  const std::string chosen =
      algorithm.empty() ? std::string(cost::PartitionAlgorithmName(config.pipeline.partition)) : algorithm;
  if (chosen != "manual" || report.algorithm == "manual") return {};
  return {fmt::format("{}: /pipeline/first_layers lists {} first layers, not one per stage ({}): the stages are cut "
                      "by {}, as simulate cuts them",
                      config.source, config.pipeline.first_layers.size(), report.cells.size(), report.algorithm)};
}

std::string PartitionJson(const cost::Config& config, const partition::PartitionReport& report) {
  nlohmann::ordered_json j;
  j["algorithm"] = report.algorithm;
  j["user_costs"] = report.user_costs;
  j["cells"] = nlohmann::ordered_json::array();
  for (const auto& c : report.cells) {
    j["cells"].push_back({{"first_layer", c.first_layer},
                          {"last_layer", c.last_layer},
                          {"device", c.device},
                          {"device_name", config.cluster.devices[c.device].name},
                          {"cost", c.cost},
                          {"time_s", c.time_s},
                          {"params", c.params},
                          {"peak_memory_bytes", c.peak_memory_bytes},
                          {"boundary_bytes", c.boundary_bytes}});
  }
  j["bottleneck_s"] = report.bottleneck_s;
  j["imbalance"] = report.imbalance;
  return j.dump(2) + "\n";
}

}  // namespace twinpipe::api
