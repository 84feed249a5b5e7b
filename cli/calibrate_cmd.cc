// `twinpipe calibrate`: fit the cost models to measured traces.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/execution.h"
#include "cli/commands.h"
#include "cli/fail.h"
#include "cli/plan_source.h"
#include "cli/schedule_io.h"
#include "simulate/calibration.h"
#include "simulate/runs.h"
#include "twinpipe_commit.h"

namespace twinpipe::cli {
namespace {

struct CalibrateOptions {
  std::vector<std::string> measured;
  std::string runs;  // a table of runs instead of traces
  bool keep_bounds = false;  // --runs: leave coefficients at their range's ends
  std::vector<std::string> configs;  // one for every trace, or one for all
  PlanSource source;
  std::string output;
  std::string command;
};

// Stamps the calibration with its command and commit and writes it.
int Write(simulate::Calibration& cal, const CalibrateOptions& o) {
  cal.command = o.command;
  // The commit of the build (twinpipe_commit.h); $TWINPIPE_COMMIT overrides it.
  cal.commit = TWINPIPE_COMMIT;
  if (const char* commit = std::getenv("TWINPIPE_COMMIT")) cal.commit = commit;
  if (auto ok = WriteOutput(o.output, cost::WriteCalibration(cal)); !ok) return Fail("calibrate", ok.error());
  return kExitOk;
}

// From a table of runs: fit the device profile, print each run's error
// before and after, write the calibration.
int RunTable(const CalibrateOptions& o) {
  auto runs = LoadRuns(o.runs);
  if (!runs) return Fail("calibrate", runs.error());
  // (A table of several kinds FitRuns refuses at once.)
  if (std::all_of(runs->begin(), runs->end(), [&](const auto& r) { return r.Device() == runs->front().Device(); })) {
    fmt::print(stderr, "twinpipe calibrate: fitting {} runs on {} ...\n", runs->size(), runs->front().Device());
  }
  auto cal = simulate::FitRuns(*runs, {.keep_bounds = o.keep_bounds});
  if (!cal) return Fail("calibrate", cal.error());
  auto before = simulate::ValidateRuns(*runs, nullptr);
  auto after = simulate::ValidateRuns(*runs, &*cal);
  if (!before || !after) return kExitRuntime;
  fmt::print(stderr, "{:>6} {:>12} {:>12} {:>8} {:>12} {:>8}\n", "line", "measured", "before", "error", "after", "error");
  for (size_t i = 0; i < runs->size(); ++i) {
    const auto& b = before->rows[i];
    const auto& a = after->rows[i];
    fmt::print(stderr, "{:>6} {:>9.2f} ms {:>9.2f} ms {:>+7.2f}% {:>9.2f} ms {:>+7.2f}%\n", b.line, 1e3 * b.measured_s,
               1e3 * b.predicted_s, 100 * b.error, 1e3 * a.predicted_s, 100 * a.error);
  }
  const auto& p = *cal->profile;
  fmt::print(stderr,
             "mean absolute error {:.2f}% -> {:.2f}% (bias {:+.2f}% -> {:+.2f}%); gemm efficiency {:.3f}, bandwidth "
             "efficiency {:.3f}, host {:.1f} us a framework op and {:.1f} us a kernel launch, kernel floor {:.2f} us\n",
             100 * before->mape, 100 * after->mape, 100 * before->bias, 100 * after->bias, p.gemm_efficiency,
             p.bandwidth_efficiency, 1e6 * p.launch_overhead_s, 1e6 * p.kernel_launch_s, 1e6 * p.kernel_floor_s);
  // Per coefficient: its value, the physical range it was held to, how far
  // the runs move with it across that range, its standard error.
  fmt::print(stderr, "{:<22} {:>12} {:>24} {:>15} {:>12}  {}\n", "coefficient", "value", "range", "sensitivity",
             "std error", "status");
  for (size_t i = 0; i < p.coefficients.size(); ++i) {
    const cost::CoefficientFit& c = p.coefficients[i];
    const auto& ranges = cost::ProfileRanges(runs->front().config.cluster.devices.front());
    fmt::print(stderr, "{:<22} {:>12.4g} {:>24} {:>14.2f}% {:>12}  {}\n", ranges[i].name, c.value,
               fmt::format("[{:.3g}, {:.3g}]", c.low, c.high), 100 * c.sensitivity,
               c.std_error ? fmt::format("{:.3g}", *c.std_error) : "-", cost::StatusName(c.status));
  }
  // Which runs pull each fitted coefficient up and down hardest.
  for (size_t i = 0; i < p.coefficients.size(); ++i) {
    const cost::CoefficientFit& c = p.coefficients[i];
    if (c.pulled_by.empty()) continue;
    std::vector<std::string> up, down;
    for (const cost::CoefficientFit::Pull& pull : c.pulled_by) {
      (pull.share > 0 ? up : down).push_back(fmt::format("{} ({:.0f}%)", pull.line, 100 * std::abs(pull.share)));
    }
    fmt::print(stderr, "{} pulled up by lines {}; down by lines {}\n", cost::kProfileCoefficients[i],
               up.empty() ? "-" : fmt::format("{}", fmt::join(up, ", ")),
               down.empty() ? "-" : fmt::format("{}", fmt::join(down, ", ")));
  }
  for (const std::string& w : p.warnings) fmt::print(stderr, "twinpipe calibrate: warning: {}\n", w);
  return Write(*cal, o);
}

int Run(const CalibrateOptions& o) {
  if (o.keep_bounds && o.runs.empty()) {
    return Fail("calibrate", {"--keep-bounds goes with --runs (a fit to a table of runs)"});
  }
  if (!o.runs.empty()) {
    if (!o.measured.empty() || !o.configs.empty()) {
      return Fail("calibrate", {"--runs fits a table of runs; give it without traces or --config"});
    }
    // Each run's config plans itself: the plan options would be ignored.
    if (o.source != PlanSource{}) {
      return Fail("calibrate", {"--runs plans every run from its own config: give it without --schedule-file, "
                                "--format, --dialect, --schedule, --recompute, --chunks or --memory-cap"});
    }
    return RunTable(o);
  }
  if (o.measured.empty() || o.configs.empty()) {
    return Fail("calibrate", {"give measured traces and --config, or --runs RUNS.jsonl"});
  }
  if (o.configs.size() != 1 && o.configs.size() != o.measured.size()) {
    return Fail("calibrate", {fmt::format("{} traces and {} configs: give one --config for all traces, or one per "
                                          "trace, in order", o.measured.size(), o.configs.size())});
  }
  // A config per distinct --config, each with its traces.
  std::vector<api::MeasuredGroup> groups;
  std::vector<std::string> seen;
  for (size_t i = 0; i < o.measured.size(); ++i) {
    const std::string& path = o.configs[o.configs.size() == 1 ? 0 : i];
    auto at = std::find(seen.begin(), seen.end(), path) - seen.begin();
    if (at == static_cast<long>(seen.size())) {
      auto config = cost::LoadConfigFile(path);
      if (!config) return Fail("calibrate", config.error());
      seen.push_back(path);
      groups.push_back({std::move(*config), {}});
    }
    auto t = LoadTrace(o.measured[i]);
    if (!t) return Fail("calibrate", t.error());
    groups[at].traces.push_back(std::move(*t));
  }
  auto cal = api::CalibrateTraces(std::move(groups), o.source, [](const std::string& w) {
    fmt::print(stderr, "twinpipe calibrate: warning: {}\n", w);
  });
  if (!cal) return Fail("calibrate", cal.error());
  return Write(*cal, o);
}

}  // namespace

void AddCalibrate(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand("calibrate", "Fit compute, link and step coefficients to measured traces");
  cmd->add_option("measured", o->measured, "measured traces (execute --trace), of the config's plan");
  cmd->add_option("--config", o->configs,
                  "the config the traces were measured with: once for all, or once per trace in order, the option "
                  "repeated (--config A --config B; runs of several micro-batch sizes tell a fixed cost per op "
                  "from a cost per sample)")
      ->allow_extra_args(false);
  cmd->add_option("--runs", o->runs,
                  "instead of traces: a table of runs (JSONL, {\"config\": {...}, \"step_time_s\": t} per line) "
                  "to fit the device profile to");
  cmd->add_flag("--keep-bounds", o->keep_bounds,
                "with --runs: leave a coefficient the runs push to an end of its physical range there (closer to runs "
                "like these, wrong beyond them) instead of holding it at the catalogue's value");
  AddPlanOptions(*cmd, o->source);
  cmd->add_option("-o,--output", o->output, "calibration file (default stdout)");
  cmd->callback([o, cmd, &exit_code] {
    o->command = "twinpipe calibrate";
    for (const auto& m : o->measured) o->command += " " + m;
    for (const auto& c : o->configs) o->command += " --config " + c;
    if (!o->runs.empty()) o->command += " --runs " + o->runs;
    if (o->keep_bounds) o->command += " --keep-bounds";
    exit_code = Run(*o);
  });
}

}  // namespace twinpipe::cli
