#include "api/plan_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/schedule_io.h"
#include "ir/builders.h"
#include "cost_models/plan_costs.h"

namespace twinpipe::api {

Result<cost::Plan> MakePlan(cost::Config& config, const PlanSource& s, const simulate::Calibration* cal) {
  // As /pipeline/memory_cap: only the auto schedule's builder plans to a cap.
  const std::string& schedule = s.schedule.empty() ? config.pipeline.schedule : s.schedule;
  if (s.memory_cap_bytes > 0 && (!s.schedule_file.empty() || schedule != ir::kAutoSchedule)) {
    return Fail(fmt::format("--memory-cap: only the auto schedule plans to a memory cap, {}",
                            !s.schedule_file.empty() ? fmt::format("{} runs as written", s.schedule_file)
                                                     : fmt::format("the schedule is {}", schedule)));
  }
  if (!s.schedule_file.empty()) {
    auto loaded = LoadSchedule(s.schedule_file, s.format, s.dialect);
    if (!loaded) return tl::unexpected(loaded.error());
    return partition::PlanForSchedule(config, std::move(loaded->schedule), s.schedule_file, cal);
  }
  partition::PlanOverrides overrides{s.schedule, std::nullopt, s.chunks};
  overrides.calibration = cal;
  overrides.memory_cap_bytes = s.memory_cap_bytes;
  if (!s.recompute.empty()) {
    // Selective recompute, or leaving it, changes a transformer's costs.
    const ir::RecomputeMode mode = *ir::RecomputeModeFromName(s.recompute);
    if (mode == ir::RecomputeMode::kSelective && !config.transformer) {
      return Fail(fmt::format("--recompute selective: {} has no transformer generator model (selective recompute "
                              "re-runs a transformer's attention core)",
                              config.source));
    }
    cost::SetParallelism(config, config.pipeline.tensor_parallel, config.pipeline.sequence_parallel, mode);
  }
  return partition::PlanFromConfig(config, overrides);
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

}  // namespace twinpipe::api
