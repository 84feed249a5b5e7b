#include "api/plan_source.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/schedule_io.h"
#include "ir/builders.h"
#include "ir/passes.h"
#include "cost_models/plan_costs.h"

namespace twinpipe::api {

Result<cost::Plan> MakePlan(cost::Config& config, const PlanSource& s, const simulate::Calibration* cal) {
  // As /pipeline/memory_cap: only the auto schedule's builder and the memory
  // partition plan to a cap; a schedule file runs as written, its cut by the
  // config's partition.
  cost::PipelineConfig planned = config.pipeline;
  if (!s.schedule.empty()) planned.schedule = s.schedule;
  // A schedule file is never the auto schedule: only its memory cut can go to the cap.
  const bool plans_to_cap = s.schedule_file.empty() ? planned.PlansToMemoryCap()
                                                    : planned.partition == cost::PartitionAlgorithm::kMemory;
  if (s.memory_cap_bytes > 0) {
    if (!plans_to_cap) {
      return Fail(fmt::format(
          "--memory-cap: only the auto schedule and the memory partition plan to a memory cap, {}",
          !s.schedule_file.empty()
              ? fmt::format("{} runs as written, cut by the {} partition", s.schedule_file,
                            cost::PartitionAlgorithmName(planned.partition))
              : fmt::format("the schedule is {} and the partition {}", planned.schedule,
                            cost::PartitionAlgorithmName(planned.partition))));
    }
    config.pipeline.memory_cap = s.memory_cap_bytes;  // a schedule file's memory cut too
  }
  if (s.schedule_file.empty() && (s.format != "auto" || s.dialect != "auto")) {
    // They read a schedule file: without one they would be ignored.
    return Fail(fmt::format("{}: the format and dialect of a schedule file, and no schedule file is given",
                            s.format != "auto" ? fmt::format("format '{}'", s.format)
                                               : fmt::format("dialect '{}'", s.dialect)));
  }
  if (!s.recompute.empty()) {
    // The mode the cut plans to, a schedule file's too (its stash and its
    // recomputes' time); selective recompute, or leaving it, changes a
    // transformer's costs.
    const auto mode = ir::RecomputeModeFromName(s.recompute);
    if (!mode) return Fail(fmt::format("recompute '{}': expected none, full, except-last or selective", s.recompute));
    if (*mode == ir::RecomputeMode::kSelective && !config.transformer) {
      return Fail(fmt::format("--recompute selective: {} has no transformer generator model (selective recompute "
                              "re-runs a transformer's attention core)",
                              config.source));
    }
    cost::SetParallelism(config, config.pipeline.tensor_parallel, config.pipeline.sequence_parallel, *mode);
  }
  if (!s.schedule_file.empty()) {
    auto loaded = LoadSchedule(s.schedule_file, s.format, s.dialect);
    if (!loaded) return tl::unexpected(loaded.error());
    return partition::PlanForSchedule(config, std::move(loaded->schedule), s.schedule_file, cal);
  }
  partition::PlanOverrides overrides{s.schedule, std::nullopt, s.chunks};
  overrides.calibration = cal;
  overrides.memory_cap_bytes = s.memory_cap_bytes;
  return partition::PlanFromConfig(config, overrides);
}

Result<cost::Plan> PlanOf(cost::Config& config, const PlanSource& source, const ir::Schedule* schedule,
                          const std::string& schedule_source, const simulate::Calibration* calibration) {
  if (!schedule) return MakePlan(config, source, calibration);
  if (source != PlanSource{}) {
    return Fail(fmt::format("{} runs as given: give it without a schedule file, its format or dialect, a schedule "
                            "name, chunks, a recompute mode or a memory cap",
                            schedule_source));
  }
  return partition::PlanForSchedule(config, *schedule, schedule_source, calibration);
}

std::vector<std::string> ScheduleFileWarnings(const PlanSource& s, const cost::Config& config,
                                              const ir::Schedule& schedule) {
  std::vector<std::string> warnings;
  if (s.schedule_file.empty()) return warnings;
  const partition::ScheduleGpus used = partition::GpusOfSchedule(config, schedule);
  const int64_t cluster = config.cluster.NumDevices();
  if (used.gpus < cluster) {
    const bool csv = s.format == "torch-csv" || (s.format == "auto" && s.schedule_file.ends_with(".csv"));
    warnings.push_back(fmt::format("{} runs {} ({} cluster devices); {} has {}: the other {} stay idle{}",
                                   s.schedule_file, used.runs, used.gpus, config.source, cluster, cluster - used.gpus,
                                   csv ? " (a torch CSV describes one replica)" : ""));
  }
  const bool recomputes = std::any_of(schedule.programs.begin(), schedule.programs.end(), [](const auto& program) {
    return std::any_of(program.begin(), program.end(), [](const ir::Op& op) { return op.kind == ir::OpKind::kRecompute; });
  });
  const ir::RecomputeMode mode = s.recompute.empty() ? config.pipeline.recompute : *ir::RecomputeModeFromName(s.recompute);
  if (!recomputes && ir::InsertsRecompute(mode)) {
    warnings.push_back(fmt::format("{} is {}, but {} has no recompute op: it runs as written, every activation kept",
                                   s.recompute.empty() ? config.source + ": /pipeline/recompute" : "--recompute",
                                   ir::RecomputeModeName(mode), s.schedule_file));
  }
  for (const auto& [given, option] : {std::pair{!s.schedule.empty(), "--schedule"},
                                      std::pair{s.chunks > 0, "--chunks"}}) {
    if (given) warnings.push_back(fmt::format("{} is not used: {} runs as written", option, s.schedule_file));
  }
  return warnings;
}

Result<std::vector<simulate::Run>> LoadRuns(const std::string& path) {
  auto text = ReadFile(path);
  if (!text) return tl::unexpected(text.error());
  return LoadRunsText(*text, path);
}

Result<std::vector<simulate::Run>> LoadRunsText(std::string_view text, std::string_view source) {
  // A run is planned (cut, and its auto schedule ordered) with its config's catalogue costs.
  return simulate::ReadRuns(text, source,
                            [](const cost::Config& config) { return partition::PlanFromConfig(config); });
}

Result<std::optional<simulate::Calibration>> LoadCalibration(const std::string& path, const cost::Config& config) {
  if (path.empty()) return std::optional<simulate::Calibration>();
  auto text = ReadFile(path);
  if (!text) return tl::unexpected(text.error());
  auto cal = cost::ReadCalibration(*text, path);
  if (!cal) return tl::unexpected(cal.error());
  const std::string& device = config.cluster.devices.at(0).name;
  if (!cal->device.empty() && cal->device != device) {
    return Fail(fmt::format("{}: /device: fitted on '{}', but {} runs on '{}'; calibrate from traces of this device",
                            path, cal->device, config.source, device));
  }
  return std::optional<simulate::Calibration>(std::move(*cal));
}

Result<std::vector<simulate::Calibration>> LoadRunCalibrations(const std::vector<std::string>& paths,
                                                                const std::vector<simulate::Run>& runs,
                                                                std::string_view runs_source) {
  std::vector<simulate::Calibration> out;
  std::vector<std::string> kinds;  // the runs' device kinds, in table order
  for (const simulate::Run& r : runs) {
    if (std::find(kinds.begin(), kinds.end(), r.Device()) == kinds.end()) kinds.push_back(r.Device());
  }
  for (size_t i = 0; i < paths.size(); ++i) {
    auto text = ReadFile(paths[i]);
    if (!text) return tl::unexpected(text.error());
    auto cal = cost::ReadCalibration(*text, paths[i]);
    if (!cal) return tl::unexpected(cal.error());
    if (!cal->device.empty() && std::find(kinds.begin(), kinds.end(), cal->device) == kinds.end()) {
      return Fail(fmt::format("{}: /device: fitted on '{}', but no run of {} is on it (they run on '{}'); calibrate "
                              "from runs or traces of their devices",
                              paths[i], cal->device, runs_source, fmt::join(kinds, "', '")));
    }
    for (size_t j = 0; j < i; ++j) {
      if (out[j].device == cal->device) {
        return Fail(fmt::format("{}: /device: fitted on '{}', as {} is too; give one calibration per device kind",
                                paths[i], cal->device, paths[j]));
      }
    }
    out.push_back(std::move(*cal));
  }
  return out;
}

}  // namespace twinpipe::api
