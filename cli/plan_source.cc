#include "cli/plan_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/schedule_io.h"
#include "ir/builders.h"
#include "cost_models/plan_costs.h"

namespace twinpipe::cli {

void AddPlanOptions(CLI::App& cmd, PlanSource& s) {
  cmd.add_option("--schedule-file", s.schedule_file, "run this schedule (text, JSON or torch CSV) instead of building one");
  cmd.add_option("--format", s.format, "schedule file format")->check(CLI::IsMember({"auto", "text", "json", "torch-csv"}));
  cmd.add_option("--dialect", s.dialect, "torch CSV dialect")->check(CLI::IsMember({"auto", "current", "older"}));
  cmd.add_option("--schedule,-s", s.schedule,
                 fmt::format("override the config's schedule ({})", fmt::join(ir::ScheduleNames(), ", ")));
  cmd.add_option("--memory-cap", s.memory_cap_bytes,
                 "bytes a device may hold under the auto schedule (default: /pipeline/memory_cap, else its memory)")
      ->check(BytesValidator());
  cmd.add_option("--chunks,-v", s.chunks, "override the stages per device (interleaved >= 2)")->check(CLI::Range(1, 1 << 16));
  cmd.add_option("--recompute", s.recompute, "override the config's recompute mode")
      ->check(CLI::IsMember({"none", "full", "except-last", "selective"}));
}

CLI::Validator BytesValidator() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        double v = 0;
        return CLI::detail::lexical_cast(text, v) && v >= 1 && v <= 1e18 ? "" : "expected bytes, a number in [1, 1e18]";
      },
      "BYTES");
}

Result<cost::Plan> MakePlan(cost::Config& config, const PlanSource& s, const simulate::Calibration* cal) {
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
  // A run is planned (cut, and its auto schedule ordered) with its config's catalogue costs.
  return simulate::ReadRuns(*text, path,
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

void WarnExtrapolation(std::string_view command, const std::string& path, std::string_view what,
                       const std::vector<std::string>& lines) {
  if (lines.empty()) return;
  fmt::print(stderr, "twinpipe {}: warning: the calibration ({}) was fitted on runs that do not cover {}:\n", command,
             path, what);
  for (const std::string& line : lines) fmt::print(stderr, "  {}\n", line);
}

}  // namespace twinpipe::cli
