// `twinpipe validate RUNS.jsonl`: predict every run of a table of measured
// runs and report the error (mean absolute, signed bias, worst rows, and by
// group: data-parallel degree, GPU count, micro-batch size, model size in
// billions of parameters, pipeline depth, precision, tensor-parallel degree;
// simulate/runs.h states the rules).
#include <memory>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/fail.h"
#include "cli/plan_source.h"
#include "cli/schedule_io.h"
#include "simulate/runs.h"

namespace twinpipe::cli {
namespace {

struct ValidateOptions {
  std::string runs;
  std::string calibration;
  bool json = false;
};

int Run(const ValidateOptions& o) {
  auto runs = LoadRuns(o.runs);
  if (!runs) return Fail("validate", runs.error());
  // Refused when fitted on another device than the runs'.
  auto cal = LoadCalibration(o.calibration, runs->front().config);
  if (!cal) return Fail("validate", cal.error());
  auto v = simulate::ValidateRuns(*runs, *cal ? &**cal : nullptr);
  if (!v) return Fail("validate", v.error());
  if (o.json) {
    nlohmann::ordered_json j;
    j["runs"] = v->rows.size();
    j["mape"] = v->mape;
    j["bias"] = v->bias;
    j["groups"] = nlohmann::ordered_json::array();
    for (const auto& g : v->groups) {
      j["groups"].push_back({{"key", g.key}, {"value", g.value}, {"runs", g.runs}, {"mape", g.mape}, {"bias", g.bias}});
    }
    // The ten worst, then every run in table order (a study over the
    // predictions, as scripts/fp8_ratio.py makes, reads them here).
    for (const auto& [key, list] : {std::pair{"worst", &v->worst}, std::pair{"rows", &v->rows}}) {
      j[key] = nlohmann::ordered_json::array();
      for (const auto& w : *list) {
        j[key].push_back({{"line", w.line}, {"measured_s", w.measured_s}, {"predicted_s", w.predicted_s},
                          {"error", w.error}});
      }
    }
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print("{} runs   mean absolute error {:.2f}%   bias {:+.2f}%{}\n", v->rows.size(), 100 * v->mape,
             100 * v->bias, *cal ? fmt::format("   (calibration {})", o.calibration) : "");
  fmt::print("{:<18} {:>6} {:>6} {:>8} {:>8}\n", "group", "value", "runs", "mape", "bias");
  for (const auto& g : v->groups) {
    fmt::print("{:<18} {:>6} {:>6} {:>7.2f}% {:>+7.2f}%\n", g.key, g.value, g.runs, 100 * g.mape, 100 * g.bias);
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
  cmd->add_option("--calibration", o->calibration, "a calibration file (calibrate --runs, or from traces)");
  cmd->add_flag("--json", o->json, "print runs, mape, bias, groups[], worst[] and rows[] (every run, in table order) as JSON");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace twinpipe::cli
