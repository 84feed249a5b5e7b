// Where `simulate`, `execute` and the Python module get their plan: a
// schedule file run with the config's model and cluster, or the config's own
// pipeline with overrides; and the calibration and run tables they read.
//
//   PlanSource src{.schedule_file = "pipe.csv"};
//   Result<cost::Plan> plan = MakePlan(config, src);
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost_models/config.h"
#include "partition/pipeline_plan.h"
#include "simulate/calibration.h"
#include "simulate/runs.h"

namespace twinpipe::api {

struct PlanSource {
  std::string schedule_file;
  std::string format = "auto";
  std::string dialect = "auto";
  std::string schedule;   // override of pipeline.schedule
  std::string recompute;  // override of pipeline.recompute
  int chunks = 0;         // override of pipeline.chunks
  double memory_cap_bytes = 0;  // the auto schedule's and memory partition's limit per device (0: its memory)
  // Equal to PlanSource{}: no option given (every member compared, new ones too).
  bool operator==(const PlanSource&) const = default;
};

// Bad files and configs are bad input (a format or dialect other than auto
// without a schedule file too); a builder failure or a model that
// does not fit in memory is a runtime error.
// The auto schedule plans with `calibration`'s costs when one is given.
// `--recompute` changes `config` itself (a transformer's costs change with
// selective recompute), so that costs taken from it after match the plan.
Result<cost::Plan> MakePlan(cost::Config& config, const PlanSource& source,
                            const simulate::Calibration* calibration = nullptr);

// The plan of a schedule object (the Python module's Schedule, named
// `schedule_source` in messages) run as it is with the config's model and
// cluster, or without one MakePlan's. A schedule object with any option of
// `source` is bad input: what would plan one would be ignored.
Result<cost::Plan> PlanOf(cost::Config& config, const PlanSource& source, const ir::Schedule* schedule,
                          const std::string& schedule_source, const simulate::Calibration* calibration);

// With a schedule file, what it does not take from the config or the
// overrides, a sentence each (the command line prints them as warnings,
// the Python module as Python warnings): cluster devices no replica uses
// (a torch CSV describes one replica), a recompute mode the config asks for
// while the file has no recompute op (it runs as written, its cut planned
// to that mode), and the overrides of the schedule and its chunks, which a
// file replaces. Nothing without a schedule file.
std::vector<std::string> ScheduleFileWarnings(const PlanSource& source, const cost::Config& config,
                                              const ir::Schedule& schedule);

// A calibration file for the config (`--calibration` of simulate and
// search): none for an empty path; bad input when it cannot be read, is
// malformed, or was fitted on another device than the config's.
Result<std::optional<simulate::Calibration>> LoadCalibration(const std::string& path, const cost::Config& config);

// The calibrations a table of runs is validated with (`validate
// --calibration`, repeatable; the Python module's validate): each path's,
// each fitted on a device kind some run is on (every file records its
// kind: cost::ReadCalibration), no two on one kind. Bad input naming the
// file otherwise. Runs on a kind
// none was fitted on are predicted with the catalogue's figures
// (Validation::uncalibrated).
Result<std::vector<simulate::Calibration>> LoadRunCalibrations(const std::vector<std::string>& paths,
                                                                const std::vector<simulate::Run>& runs,
                                                                std::string_view runs_source);

// A table of runs (`calibrate --runs`, `validate`): bad input when the file
// cannot be read or a line is malformed (naming the line and JSON path).
// LoadRunsText reads the table's text, its messages naming `source`.
Result<std::vector<simulate::Run>> LoadRuns(const std::string& path);
Result<std::vector<simulate::Run>> LoadRunsText(std::string_view text, std::string_view source);

}  // namespace twinpipe::api
