// What the commands compute and what their --json prints, as library calls:
// the `twinpipe` program and the Python module (`import twinpipe`) both call
// these, so the module's JSON is the program's, byte for byte.
//
//   auto sim = api::RunSimulation(config, PlanSource{}, nullptr);
//   std::string json = api::SimulateJson(*sim);   // what `simulate --json` prints
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/plan_source.h"
#include "cost_models/config.h"
#include "ir/result.h"
#include "ir/schedule.h"
#include "partition/launch_settings.h"
#include "partition/plan.h"
#include "search/search.h"
#include "simulate/calibration.h"
#include "simulate/engine.h"
#include "simulate/runs.h"
#include "traces/trace.h"

namespace twinpipe::api {

// One simulated training step: the config as planned (MakePlan may change
// its recompute), the plan, the simulation, and what the config has outside
// the calibration's runs (set when the calibration records its coverage).
struct Simulation {
  cost::Config config;
  cost::Plan plan;
  simulate::SimResult result;
  double samples_per_step = 0;  // samples of all replicas together
  std::optional<std::vector<std::string>> extrapolation;
};

// `simulate`: plans `config` from `source` (or runs `schedule` when given,
// named `schedule_source` in messages), costs and simulates it.
Result<Simulation> RunSimulation(cost::Config config, const PlanSource& source,
                                 const simulate::Calibration* calibration, const ir::Schedule* schedule = nullptr,
                                 const std::string& schedule_source = "the schedule");
// `simulate --json`.
std::string SimulateJson(const Simulation& simulation);
// `simulate --trace` (native trace, the SVG timeline's input).
traces::Trace SimulationTrace(const Simulation& simulation);
// The predicted out-of-memory that makes `simulate` exit 1 ("device 1 is
// predicted to run out of memory: ..."), or nothing.
std::optional<std::string> OverflowMessage(const Simulation& simulation);

// `schedule`: built from a config (its plan's verified schedule), or with no
// config from stages, micro-batches and the rest.
struct ScheduleRequest {
  int stages = 0;
  int micro_batches = 0;
  int chunks = 0;
  std::string schedule;   // default gpipe (a config's own without one)
  std::string recompute;  // default none (a config's own without one)
  std::string recompute_timing = "overlapped";
  int64_t activation_bytes = 0;
  int replicas = 1;
};
Result<ir::Schedule> BuildSchedule(const cost::Config* config, ScheduleRequest request);

// `validate`: each run's line -> what its config has outside the coverage
// of the calibration that predicts it (simulate::CalibrationFor; runs
// inside are left out); empty where none records coverage.
std::map<int, std::vector<std::string>> RunExtrapolations(const std::vector<simulate::Run>& runs,
                                                          std::span<const simulate::Calibration* const> calibrations);
inline std::map<int, std::vector<std::string>> RunExtrapolations(const std::vector<simulate::Run>& runs,
                                                                 const simulate::Calibration* calibration) {
  return RunExtrapolations(runs, std::span<const simulate::Calibration* const>(&calibration, 1));
}
// `validate --json`; `outside` given when a calibration records coverage.
// With calibrations that leave runs on other device kinds uncalibrated:
// "uncalibrated_runs", their count, and each row's "calibrated".
std::string ValidateJson(const simulate::Validation& validation,
                         const std::map<int, std::vector<std::string>>* outside);

// The grid's knobs as `search` names them (--max-context-parallel,
// --min-context-tokens, --sharding, --tp-comm-overlap, --max-chunks).
struct SearchKnobs {
  int max_context_parallel = 0;
  int min_context_tokens = 4096;
  std::vector<std::string> shardings{"none", "optimizer", "full"};
  std::string tp_comm_overlap = "both";  // off | on | both
  int max_chunks = 0;
};
// Sets `options`' grid from `knobs`; bad input names the knob and what it takes.
Result<bool> ApplySearchKnobs(const SearchKnobs& knobs, search::SearchOptions& options);

// `search --json`: `best_config` is the best candidate as a config (null
// when none fits).
nlohmann::ordered_json CandidateJson(const search::Candidate& candidate);
std::string SearchJson(const search::SearchResult& result, const nlohmann::ordered_json& best_config);
// `search --max-layers --json`.
std::string MaxLayersJson(const cost::Config& config, const std::vector<search::MaxLayersRow>& rows);

// `export`: the launch settings of `config` (read from `config_source`) for
// `framework` (megatron or torchtitan). `schedule_csv`, for torchtitan, is a
// torch schedule CSV that must be this config's pipeline (its ranks, stages
// and micro-batches), since torchtitan reads it at launch.
Result<partition::LaunchSettings> ExportSettings(const cost::Config& config, const std::string& config_source,
                                                 const std::string& framework, const std::string& schedule_csv);

// `partition`: the config's model cut as `simulate` plans it, by
// `algorithm` (a name of cost::kPartitionAlgorithmNames; empty: the config's
// /pipeline/partition).
Result<partition::PartitionReport> PartitionConfig(const cost::Config& config, const std::string& algorithm);
// What `partition` notes: a manual list of one first layer a device, not a
// stage, cut by another algorithm.
std::vector<std::string> PartitionNotes(const cost::Config& config, const std::string& algorithm,
                                        const partition::PartitionReport& report);
// `partition --json`.
std::string PartitionJson(const cost::Config& config, const partition::PartitionReport& report);

}  // namespace twinpipe::api
