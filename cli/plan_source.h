// The command-line side of a plan's source (api/plan_source.h): the options
// that fill a PlanSource, and the warning a calibration's coverage gives.
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

// Prints on stderr "twinpipe <command>: warning: the calibration (<path>)
// was fitted on runs that do not cover <what>:" and then each of `lines`,
// indented (simulate, validate and search with a calibration that records
// its coverage); nothing when `lines` is empty.
// With --schedule-file, what the file does not take from the config, on
// stderr as "twinpipe <command>: warning: ...": GPUs of the cluster no
// replica uses (a torch CSV describes one replica), and a recompute mode the
// config asks for while the file has no recompute op (it runs as written).
void WarnScheduleFile(std::string_view command, const PlanSource& source, const cost::Config& config,
                      const ir::Schedule& schedule);

void WarnExtrapolation(std::string_view command, const std::string& path, std::string_view what,
                       const std::vector<std::string>& lines);

}  // namespace twinpipe::cli
