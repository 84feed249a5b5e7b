#include "cli/plan_source.h"

#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/builders.h"

namespace twinpipe::cli {

void AddPlanOptions(CLI::App& cmd, PlanSource& s) {
  CLI::Option* file =
      cmd.add_option("--schedule-file", s.schedule_file, "run this schedule (text, JSON or torch CSV) instead of building one");
  // Both read a schedule file: without one they would be ignored.
  cmd.add_option("--format", s.format, "schedule file format")
      ->check(CLI::IsMember({"auto", "text", "json", "torch-csv"}))
      ->needs(file);
  cmd.add_option("--dialect", s.dialect, "torch CSV dialect")
      ->check(CLI::IsMember({"auto", "current", "older"}))
      ->needs(file);
  cmd.add_option("--schedule,-s", s.schedule,
                 fmt::format("override the config's schedule ({})", fmt::join(ir::ScheduleNames(), ", ")));
  cmd.add_option("--memory-cap", s.memory_cap_bytes,
                 "bytes a device may hold under the auto schedule or the memory partition (default: "
                 "/pipeline/memory_cap, else its memory)")
      ->check(BytesValidator());
  cmd.add_option("--chunks,-v", s.chunks, "override the stages per device (interleaved >= 2)")->check(CLI::Range(1, 1 << 16));
  cmd.add_option("--recompute", s.recompute, "override the config's recompute mode")
      ->check(CLI::IsMember({"none", "full", "except-last", "selective"}));
}

namespace {

// A number in [lo, hi], written `range` in the message; NaN fails too (CLI::Range lets it through).
CLI::Validator NumberIn(std::string what, std::string type, double lo, double hi, std::string range) {
  return CLI::Validator(
      [what = std::move(what), range = std::move(range), lo, hi](const std::string& text) -> std::string {
        double v = 0;
        return CLI::detail::lexical_cast(text, v) && v >= lo && v <= hi
                   ? ""
                   : fmt::format("expected {}, a number in {}", what, range);
      },
      std::move(type));
}

}  // namespace

CLI::Validator BytesValidator() { return NumberIn("bytes", "BYTES", 1, 1e18, "[1, 1e18]"); }

CLI::Validator SecondsValidator(double lo, double hi) {
  return NumberIn("seconds", "SECONDS", lo, hi, fmt::format("[{}, {}]", lo, hi));
}

void WarnScheduleFile(std::string_view command, const PlanSource& source, const cost::Config& config,
                      const ir::Schedule& schedule) {
  for (const std::string& w : api::ScheduleFileWarnings(source, config, schedule)) {
    fmt::print(stderr, "twinpipe {}: warning: {}\n", command, w);
  }
}

void WarnExtrapolation(std::string_view command, const std::string& path, std::string_view what,
                       const std::vector<std::string>& lines) {
  if (lines.empty()) return;
  fmt::print(stderr, "twinpipe {}: warning: the calibration ({}) was fitted on runs that do not cover {}:\n", command,
             path, what);
  for (const std::string& line : lines) fmt::print(stderr, "  {}\n", line);
}

}  // namespace twinpipe::cli
