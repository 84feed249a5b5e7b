// The command-line side of a plan's source (api/plan_source.h): the options
// that fill a PlanSource, and the warnings a calibration's coverage and a schedule file give.
//
//   PlanSource src;  AddPlanOptions(*cmd, src);
//   Result<cost::Plan> plan = MakePlan(config, src);
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "api/plan_source.h"
#include "api/schedule_io.h"
#include "cost_models/config.h"
#include "ir/schedule.h"

namespace twinpipe::cli {

using api::LoadCalibration;
using api::LoadRuns;
using api::MakePlan;
using api::PlanSource;

// Adds --schedule-file, --format, --dialect, --schedule, --chunks and --recompute.
void AddPlanOptions(CLI::App& cmd, PlanSource& source);

// A memory cap in bytes (`--memory-cap` of simulate, execute, calibrate and
// search): a number in [1, 1e18], as /pipeline/memory_cap.
CLI::Validator BytesValidator();
// Seconds in [lo, hi] (NaN refused).
CLI::Validator SecondsValidator(double lo, double hi);

// Prints on stderr "twinpipe <command>: warning: the calibration (<path>)
// was fitted on runs that do not cover <what>:" and then each of `lines`,
// indented (simulate, validate and search with a calibration that records
// its coverage); nothing when `lines` is empty.
void WarnExtrapolation(std::string_view command, const std::string& path, std::string_view what,
                       const std::vector<std::string>& lines);

// Prints api::ScheduleFileWarnings on stderr, each as "twinpipe <command>:
// warning: ..." (simulate, execute on rank 0, calibrate).
void WarnScheduleFile(std::string_view command, const PlanSource& source, const cost::Config& config,
                      const ir::Schedule& schedule);

}  // namespace twinpipe::cli
