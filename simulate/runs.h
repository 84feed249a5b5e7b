// A table of past runs (JSONL, one {"config": {...}, "step_time_s": t} per
// line; other keys, such as the converter's "row" and "source", are
// ignored): read it, predict every run, fit a device profile's few
// coefficients to the measured iteration times, and report the error, in all
// and by group (`twinpipe calibrate --runs`, `twinpipe validate`).
//
//   Result<std::vector<Run>> runs = ReadRuns(text, "runs.jsonl", planner);
//   Result<Calibration> cal = FitRuns(*runs);
//   Result<Validation> v = ValidateRuns(*runs, &*cal);  v->mape
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cost_models/config.h"
#include "ir/result.h"
#include "cost_models/plan.h"
#include "simulate/calibration.h"

namespace twinpipe::simulate {

struct Run {
  int line = 0;              // 1-based line of the table
  cost::Config config;
  double step_time_s = 0;    // measured
  cost::Plan plan;      // planned with the catalogue's profile
  // The config as the table gave it, less its GPU count (/cluster/devices),
  // as canonical JSON: runs alike but for their GPU count share it (empty:
  // alike with no run).
  std::string alike;
  std::string source;        // "FILE:LINE", as the table's messages name it

  // The device kind the run is on (one per run).
  const std::string& Device() const { return config.cluster.devices.at(0).name; }
};

// How a run's config becomes its plan: the partitioner's one pipeline
// (partition::PlanFromConfig, with this library's AutoScheduler for `auto`),
// handed in by the caller so that simulate/ does not depend on partition/.
using Planner = std::function<Result<cost::Plan>(const cost::Config&)>;

// Bad input names the line and the JSON path. Each run is on one device
// kind; a table may mix kinds (the published tables' gpu column): validate
// predicts each run with its own kind's calibration, and calibrate --runs
// (FitRuns) fits one kind's profile, so it refuses a mixed table.
Result<std::vector<Run>> ReadRuns(std::string_view text, std::string_view source, const Planner& planner);

// The calibration that predicts `run` among `calibrations` (null entries
// skipped): the one fitted on the run's device kind, else one that names
// no kind (made in code: every file records its kind); null when none does
// (the catalogue's figures). A calibration
// fitted on another kind never predicts it: its profile and per-op fits
// describe that kind's GPUs.
const Calibration* CalibrationFor(const Run& run, std::span<const Calibration* const> calibrations);

// Threads PredictRuns uses unless told: TWINPIPE_THREADS when it is a
// positive integer, else the machine's hardware threads (with a warning on
// stderr, once, when TWINPIPE_THREADS is set to anything else).
size_t PredictionThreads();
// The thread count `value` (TWINPIPE_THREADS's text) asks for: a positive
// decimal integer of at most kMostThreads; nothing for anything else.
inline constexpr size_t kMostThreads = 4096;
std::optional<size_t> ParseThreadCount(std::string_view value);

// Predicted step time of each run (seconds), each with its CalibrationFor
// among `calibrations`. The runs are simulated on `threads` threads; the
// result (and the line a failure names: the first in table order) does not
// depend on how many.
Result<std::vector<double>> PredictRuns(const std::vector<Run>& runs,
                                        std::span<const Calibration* const> calibrations,
                                        size_t threads = PredictionThreads());
// With one calibration (or none: null): the runs on its device kind take it.
inline Result<std::vector<double>> PredictRuns(const std::vector<Run>& runs, const Calibration* calibration,
                                               size_t threads = PredictionThreads()) {
  return PredictRuns(runs, std::span<const Calibration* const>(&calibration, 1), threads);
}

// Fits the device profile's GEMM and bandwidth fractions, host time per
// framework op, GPU time per framework op beyond its bytes and FLOPs
// (Device::kernel_floor_s) and host time per kernel launch: five
// coefficients, not one per run, to the least mean absolute relative error
// of the predicted step times, the figure ValidateRuns reports (Nelder-Mead
// over logit coordinates, from the catalogue's values): a run far off, as a
// single-step timing can be, pulls no harder than one a little off. Runs
// keep their plans.
//
// Each coefficient stays in its physical range (cost::ProfileRanges). One
// the runs do not move (kLeastSensitivity), the less telling of two they
// cannot tell apart, and, unless `keep_bounds`, one the fit pushes to an end
// of its range are held at the catalogue's value, one at a time, and the
// rest refitted; each is reported (ProfileFit::coefficients, warnings).
// `keep_bounds` leaves a coefficient at its bound instead: closer to runs
// like the fitted ones, wrong beyond them.
//
// The profile is one device kind's: a table whose runs are on several kinds
// is refused, naming the first run on another kind than the first run's.
struct FitOptions {
  bool keep_bounds = false;
};
Result<Calibration> FitRuns(const std::vector<Run>& runs, const FitOptions& options = {});

struct RunError {
  int line = 0;
  double measured_s = 0, predicted_s = 0;
  double error = 0;  // (predicted - measured) / measured
};

struct ErrorGroup {
  std::string key, value;  // "pipeline_parallel", "2"
  int runs = 0;
  double mape = 0, bias = 0;
};

struct Validation {
  std::vector<RunError> rows;     // in table order
  double mape = 0, bias = 0;      // mean |error|, mean error
  // By key (data_parallel, device where the table mixes device kinds,
  // gpus, micro_batch, params_billions, pipeline_parallel, precision,
  // tensor_parallel), then by value: numbers in order, the size buckets
  // small to large, devices and precisions by name.
  std::vector<ErrorGroup> groups;
  std::vector<RunError> worst;    // the ten largest |error|
  // Weak scaling: each set of two or more runs alike but for their GPU
  // count (Run::alike; at least two counts), by its first line: the first
  // run in table order at the fewest GPUs and at the most, and how much
  // longer the step is at the most than at the fewest (the means over the
  // runs at each count), measured and predicted.
  struct Scaling {
    int runs = 0;
    RunError fewest, most;
    int fewest_gpus = 0, most_gpus = 0;
    double measured_growth = 0, predicted_growth = 0;  // most / fewest - 1
  };
  std::vector<Scaling> scaling;
  double scaling_measured = 0, scaling_predicted = 0;  // the growths' means over the sets
  // With calibrations: the runs (by line, ascending: table order) none of
  // them predicts, on device kinds none was fitted on, predicted with the
  // catalogue's figures.
  std::vector<int> uncalibrated;
};

// The model's parameter count (the summary's size groups; a calibration's
// coverage counts it alike): cost_models/config.h.
using cost::ModelParameters;

// The summary's size group of a model of `params` parameters: "<10" below
// 10e9, "10-100" from 10e9 to below 100e9, ">=100" from 100e9 (the
// key `params_billions`).
std::string_view ParametersGroup(double params);

// Each run predicted with its CalibrationFor among `calibrations`.
Result<Validation> ValidateRuns(const std::vector<Run>& runs, std::span<const Calibration* const> calibrations);
inline Result<Validation> ValidateRuns(const std::vector<Run>& runs, const Calibration* calibration) {
  return calibration ? ValidateRuns(runs, std::span<const Calibration* const>(&calibration, 1))
                     : ValidateRuns(runs, std::span<const Calibration* const>());
}

}  // namespace twinpipe::simulate
