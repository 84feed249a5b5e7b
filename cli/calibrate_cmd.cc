// `twinpipe calibrate`: fit the cost models to measured traces.
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/plan_source.h"
#include "cli/schedule_io.h"
#include "simulate/calibration.h"

namespace twinpipe::cli {
namespace {

struct CalibrateOptions {
  std::vector<std::string> measured;
  std::string config;
  PlanSource source;
  std::string output;
  std::string command;
};

int Run(const CalibrateOptions& o) {
  auto config = cost::LoadConfigFile(o.config);
  if (!config) {
    fmt::print(stderr, "twinpipe calibrate: {}\n", config.error().message);
    return kExitBadInput;
  }
  auto plan = MakePlan(*config, o.source);
  if (!plan) {
    fmt::print(stderr, "twinpipe calibrate: {}\n", plan.error().message);
    return ExitCodeOf(plan.error());
  }
  std::vector<traces::Trace> traces;
  for (const auto& path : o.measured) {
    auto t = LoadTrace(path);
    if (!t) {
      fmt::print(stderr, "twinpipe calibrate: {}\n", t.error().message);
      return kExitBadInput;
    }
    traces.push_back(std::move(*t));
  }
  auto cal = simulate::FitCalibration(*config, *plan, traces);
  if (!cal) {
    fmt::print(stderr, "twinpipe calibrate: {}\n", cal.error().message);
    return kExitBadInput;
  }
  cal->command = o.command;
  // The commit configured into the build; $TWINPIPE_COMMIT overrides it.
  cal->commit = TWINPIPE_COMMIT;
  if (const char* commit = std::getenv("TWINPIPE_COMMIT")) cal->commit = commit;
  if (auto ok = WriteOutput(o.output, simulate::WriteCalibration(*cal)); !ok) {
    fmt::print(stderr, "twinpipe calibrate: {}\n", ok.error().message);
    return kExitRuntime;
  }
  return kExitOk;
}

}  // namespace

void AddCalibrate(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand("calibrate", "Fit compute, link and step coefficients to measured traces");
  cmd->add_option("measured", o->measured, "measured traces (execute --trace), of the config's plan")->required();
  cmd->add_option("--config", o->config, "the config the traces were measured with")->required();
  AddPlanOptions(*cmd, o->source);
  cmd->add_option("-o,--output", o->output, "calibration file (default stdout)");
  cmd->callback([o, cmd, &exit_code] {
    o->command = "twinpipe calibrate";
    for (const auto& m : o->measured) o->command += " " + m;
    o->command += " --config " + o->config;
    exit_code = Run(*o);
  });
}

}  // namespace twinpipe::cli
