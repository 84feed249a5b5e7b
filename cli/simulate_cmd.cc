// `twinpipe simulate`: predict one training step of a config's pipeline (or
// of a schedule file run with a config's model and cluster), op by op.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/fail.h"
#include "cli/plan_source.h"
#include "cli/schedule_io.h"
#include "cost_models/config.h"
#include "ir/units.h"
#include "partition/pipeline_plan.h"
#include "simulate/calibration.h"
#include "cost_models/plan_costs.h"
#include "simulate/engine.h"
#include "simulate/report.h"
#include "traces/trace.h"

namespace twinpipe::cli {
namespace {

struct SimulateOptions {
  std::string config;
  PlanSource source;
  std::string calibration;
  bool json = false;
  std::string trace;
  std::string chrome;
};

int Run(const SimulateOptions& o) {
  auto config = cost::LoadConfigFile(o.config);
  if (!config) return Fail("simulate", config.error());
  auto calibration = LoadCalibration(o.calibration, *config);
  if (!calibration) return Fail("simulate", calibration.error());
  auto plan = MakePlan(*config, o.source, *calibration ? &**calibration : nullptr);
  if (!plan) return Fail("simulate", plan.error());
  // What the config has outside the runs the calibration was fitted on.
  std::optional<std::vector<std::string>> extrapolation;
  if (*calibration && (*calibration)->coverage) {
    extrapolation = cost::Extrapolations(*(*calibration)->coverage, *config);
    WarnExtrapolation("simulate", o.calibration, "this config; its prediction extrapolates", *extrapolation);
  }
  const simulate::PlanCosts costs = cost::CostsFromPlan(*config, *plan, *calibration ? &**calibration : nullptr);
  auto result = simulate::Simulate(plan->schedule, costs);
  if (!result) return Fail("simulate", result.error());
  const double samples = static_cast<double>(config->training.batch) * plan->schedule.replicas;
  if (!o.trace.empty() || !o.chrome.empty()) {
    traces::Trace trace = simulate::ToTrace(plan->schedule, *result, "simulate");
    trace.tensor_parallel = config->pipeline.tensor_parallel;
    for (const auto& [path, text] : {std::pair{o.trace, &traces::WriteTraceJson},
                                     std::pair{o.chrome, &traces::WriteChromeTrace}}) {
      if (path.empty()) continue;
      if (auto ok = WriteOutput(path, text(trace)); !ok) return Fail("simulate", ok.error());
    }
  }
  fmt::print("{}", o.json ? simulate::SummaryJson(plan->schedule, *result, samples,
                                                  extrapolation ? &*extrapolation : nullptr)
                          : simulate::SummaryTable(plan->schedule, *result, samples));
  if (!o.json && config->pipeline.tensor_parallel > 1) {
    // Megatron's placement: tensor-parallel groups inside a node, then stages, then replicas.
    const int t = config->pipeline.tensor_parallel, D = plan->schedule.num_devices;
    fmt::print("tensor parallel: each device is a group of {} GPUs{} (device d of replica r: GPUs {} x (d + {} r) .. +{}); "
               "nodes of {} GPUs\n", t, config->pipeline.sequence_parallel ? ", sequence parallel" : "", t, D, t - 1,
               config->cluster.gpus_per_node);
  }
  if (auto over = simulate::FirstOverflow(*config, *result)) {
    return Fail("simulate", {fmt::format("device {} is predicted to run out of memory: peak {}, capacity {}",
                                         over->device, GiB(over->peak_bytes), GiB(over->capacity_bytes)),
                             ErrorKind::kRuntime});
  }
  return kExitOk;
}

}  // namespace

void AddSimulate(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand("simulate", "Predict one training step op by op, with no GPU");
  cmd->add_option("config", o->config, "config JSON (model, training, pipeline, cluster)")->required();
  AddPlanOptions(*cmd, o->source);
  cmd->add_option("--calibration", o->calibration, "cost-model coefficients fitted by `twinpipe calibrate`");
  cmd->add_flag("--json", o->json, "print the summary as one JSON object");
  cmd->add_option("--trace", o->trace, "write the predicted trace (native JSON)");
  cmd->add_option("--chrome", o->chrome, "write a Chrome / Perfetto trace");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace twinpipe::cli
