// `twinpipe validate RUNS.jsonl`: predict every run of a table of measured
// runs and report the error (mean absolute, signed bias, worst rows, and by
// group: data-parallel degree, GPU count, micro-batch size, model size in
// billions of parameters, pipeline depth, precision, tensor-parallel degree;
// simulate/runs.h states the rules) and the weak scaling of runs alike but
// for their GPU count, measured and predicted. A table may mix device
// kinds (then grouped by device too); --calibration, once per kind, predicts
// the runs on its kind, and a warning on stderr counts the runs on kinds
// none was fitted on. With a calibration that records the runs it was
// fitted on, a warning on stderr names the runs outside them.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/commands.h"
#include "cli/commands.h"
#include "cli/fail.h"
#include "cli/plan_source.h"
#include "cli/schedule_io.h"
#include "simulate/runs.h"

namespace twinpipe::cli {
namespace {

// Runs outside a calibration's coverage that the warning names one by one.
constexpr size_t kShownRuns = 10;
// Weak-scaling sets the summary shows.
constexpr size_t kShownSets = 10;

struct ValidateOptions {
  std::string runs;
  std::vector<std::string> calibrations;
  bool json = false;
};

int Run(const ValidateOptions& o) {
  auto runs = LoadRuns(o.runs);
  if (!runs) return Fail("validate", runs.error());
  // Refused when fitted on a device no run is on, or two on one.
  auto loaded = api::LoadRunCalibrations(o.calibrations, *runs, o.runs);
  if (!loaded) return Fail("validate", loaded.error());
  std::vector<const simulate::Calibration*> cals;
  for (const auto& c : *loaded) cals.push_back(&c);
  auto v = simulate::ValidateRuns(*runs, cals);
  if (!v) return Fail("validate", v.error());
  if (!v->uncalibrated.empty()) {
    std::vector<std::string> kinds;
    for (const auto& r : *runs) {
      if (!simulate::CalibrationFor(r, cals) && std::find(kinds.begin(), kinds.end(), r.Device()) == kinds.end()) {
        kinds.push_back(r.Device());
      }
    }
    fmt::print(stderr,
               "twinpipe validate: warning: no calibration was fitted on '{}': its {} of these {} runs are predicted "
               "with the catalogue's figures\n",
               fmt::join(kinds, "', '"), v->uncalibrated.size(), runs->size());
  }
  // With a calibration that records its coverage: what each run (by line)
  // has outside it.
  const bool covered =
      std::any_of(loaded->begin(), loaded->end(), [](const simulate::Calibration& c) { return c.coverage; });
  const auto outside = api::RunExtrapolations(*runs, cals);
  if (covered) {
    std::vector<std::string> shown;
    for (const auto& [line, why] : outside) {
      if (shown.size() == kShownRuns) break;
      shown.push_back(fmt::format("line {}: {}", line, fmt::join(why, "; ")));
    }
    if (outside.size() > kShownRuns) shown.push_back(fmt::format("and {} more", outside.size() - kShownRuns));
    std::vector<std::string> covering;  // the files that record coverage
    for (size_t i = 0; i < loaded->size(); ++i) {
      if ((*loaded)[i].coverage) covering.push_back(o.calibrations[i]);
    }
    WarnExtrapolation("validate", fmt::format("{}", fmt::join(covering, ", ")),
                      fmt::format("{} of these {} runs; their predictions extrapolate", outside.size(), runs->size()),
                      shown);
  }
  if (o.json) {
    fmt::print("{}", api::ValidateJson(*v, covered ? &outside : nullptr));
    return kExitOk;
  }
  fmt::print("{} runs   mean absolute error {:.2f}%   bias {:+.2f}%{}\n", v->rows.size(), 100 * v->mape,
             100 * v->bias,
             o.calibrations.empty() ? "" : fmt::format("   (calibration {})", fmt::join(o.calibrations, ", ")));
  // The value column as wide as its longest value (a device's name), at least 6.
  size_t width = 6;
  for (const auto& g : v->groups) width = std::max(width, g.value.size());
  fmt::print("{:<18} {:>{}} {:>6} {:>8} {:>8}\n", "group", "value", width, "runs", "mape", "bias");
  for (const auto& g : v->groups) {
    fmt::print("{:<18} {:>{}} {:>6} {:>7.2f}% {:>+7.2f}%\n", g.key, g.value, width, g.runs, 100 * g.mape,
               100 * g.bias);
  }
  if (!v->scaling.empty()) {
    // Weak scaling: predicted against measured growth of the step, in points.
    fmt::print("scaling: {} sets of runs alike but for their GPU count; from the fewest GPUs to the most the step "
               "grows {:+.2f}% measured, {:+.2f}% predicted\n",
               v->scaling.size(), 100 * v->scaling_measured, 100 * v->scaling_predicted);
    // The sets whose predicted growth is farthest from the measured one
    // first, at most kShownSets (--json lists every set).
    auto sets = v->scaling;
    const auto off = [](const simulate::Validation::Scaling& g) {
      return std::abs(g.predicted_growth - g.measured_growth);
    };
    std::stable_sort(sets.begin(), sets.end(), [&](const auto& a, const auto& b) { return off(a) > off(b); });
    if (sets.size() > kShownSets) {
      fmt::print("the {} farthest from the measured growth:\n", kShownSets);
      sets.resize(kShownSets);
    }
    fmt::print("{:>6} {:>6} {:>6} {:>6} {:>5} {:>9} {:>9} {:>7}\n", "line", "gpus", "line", "gpus", "runs", "measured",
               "predicted", "points");
    for (const auto& g : sets) {
      fmt::print("{:>6} {:>6} {:>6} {:>6} {:>5} {:>+8.2f}% {:>+8.2f}% {:>+7.2f}\n", g.fewest.line, g.fewest_gpus,
                 g.most.line, g.most_gpus, g.runs, 100 * g.measured_growth, 100 * g.predicted_growth,
                 100 * (g.predicted_growth - g.measured_growth));
    }
  }
  fmt::print("worst rows:\n{:>6} {:>12} {:>12} {:>8}\n", "line", "measured", "predicted", "error");
  for (const auto& w : v->worst) {
    fmt::print("{:>6} {:>9.2f} ms {:>9.2f} ms {:>+7.2f}%\n", w.line, 1e3 * w.measured_s, 1e3 * w.predicted_s,
               100 * w.error);
  }
  return kExitOk;
}

}  // namespace

void AddValidate(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* cmd = app.add_subcommand("validate", "Predict a table of measured runs (JSONL) and report the error");
  cmd->add_option("runs", o->runs, "runs, one {\"config\": {...}, \"step_time_s\": t} per line")->required();
  cmd->add_option("--calibration", o->calibrations,
                  "a calibration file (calibrate --runs, or from traces); once per device kind of a table that "
                  "mixes them: each predicts the runs on its kind")
      ->allow_extra_args(false);
  cmd->add_flag("--json", o->json,
                "print runs, mape, bias, groups[], scaling (runs alike but for their GPU count), worst[] and rows[] "
                "(every run, in table order) as JSON; with a "
                "calibration that records its coverage, extrapolated_runs and each row's extrapolated[]; with calibrations "
                "that leave runs on other device kinds uncalibrated, uncalibrated_runs and each row's calibrated");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace twinpipe::cli
