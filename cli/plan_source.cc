#include "cli/plan_source.h"

#include "cli/schedule_io.h"

namespace twinpipe::cli {

void AddPlanOptions(CLI::App& cmd, PlanSource& s) {
  cmd.add_option("--schedule-file", s.schedule_file, "run this schedule (text, JSON or torch CSV) instead of building one");
  cmd.add_option("--format", s.format, "schedule file format")->check(CLI::IsMember({"auto", "text", "json", "torch-csv"}));
  cmd.add_option("--dialect", s.dialect, "torch CSV dialect")->check(CLI::IsMember({"auto", "current", "older"}));
  cmd.add_option("--schedule,-s", s.schedule, "override the config's schedule (naive, gpipe, 1f1b)");
  cmd.add_option("--recompute", s.recompute, "override the config's recompute mode")
      ->check(CLI::IsMember({"none", "full", "except-last"}));
}

Result<partition::Plan> MakePlan(const cost::Config& config, const PlanSource& s) {
  if (!s.schedule_file.empty()) {
    auto loaded = LoadSchedule(s.schedule_file, s.format, s.dialect);
    if (!loaded) return tl::unexpected(loaded.error());
    return partition::PlanForSchedule(config, std::move(loaded->schedule));
  }
  partition::PlanOverrides overrides{s.schedule, std::nullopt};
  if (!s.recompute.empty()) overrides.recompute = ir::RecomputeModeFromName(s.recompute);
  return partition::PlanFromConfig(config, overrides);
}

}  // namespace twinpipe::cli
