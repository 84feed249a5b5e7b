// `twinpipe simulate`: predict one training step of a config's pipeline (or
// of a schedule file run with a config's model and cluster), op by op.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/commands.h"
#include "cli/commands.h"
#include "cli/fail.h"
#include "cli/plan_source.h"
#include "cli/schedule_io.h"
#include "cost_models/config.h"
#include "simulate/calibration.h"
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
  auto report = ReportStream({{"--trace", o.trace}, {"--chrome", o.chrome}});
  if (!report) return Fail("simulate", report.error());
  auto config = cost::LoadConfigFile(o.config);
  if (!config) return Fail("simulate", config.error());
  auto calibration = LoadCalibration(o.calibration, *config);
  if (!calibration) return Fail("simulate", calibration.error());
  const simulate::Calibration* cal = *calibration ? &**calibration : nullptr;
  auto sim = api::RunSimulation(std::move(*config), o.source, cal);
  if (!sim) return Fail("simulate", sim.error());
  WarnScheduleFile("simulate", o.source, sim->config, sim->plan.schedule);
  if (sim->extrapolation) {
    WarnExtrapolation("simulate", o.calibration, "this config; its prediction extrapolates", *sim->extrapolation);
  }
  if (!o.trace.empty() || !o.chrome.empty()) {
    const traces::Trace trace = api::SimulationTrace(*sim);
    for (const auto& [path, text] : {std::pair{o.trace, &traces::WriteTraceJson},
                                     std::pair{o.chrome, &traces::WriteChromeTrace}}) {
      if (path.empty()) continue;
      if (auto ok = WriteOutput(path, text(trace)); !ok) return Fail("simulate", ok.error());
    }
  }
  const cost::Config& planned = sim->config;
  fmt::print(*report, "{}", o.json ? api::SimulateJson(*sim)
                          : simulate::SummaryTable(sim->plan.schedule, sim->result, sim->samples_per_step));
  if (!o.json && planned.GpusPerDevice() > 1) {
    // Which GPUs form each device, by the config's placement
    // (/cluster/placement): the first GPU of each device of the first
    // replica (and of the second), its tensor-parallel GPUs after it, its
    // context-parallel ranks t GPUs apart.
    const int t = planned.pipeline.tensor_parallel, c = planned.pipeline.context_parallel;
    const int D = sim->plan.schedule.num_devices, R = sim->plan.schedule.replicas;
    auto firsts = [&](int replica) {
      std::vector<int64_t> gpus;
      for (int d = 0; d < std::min(D, 8); ++d) gpus.push_back(planned.GpuOf(0, d, replica));
      return fmt::format("{}{}", fmt::join(gpus, ", "), D > 8 ? ", ..." : "");
    };
    const std::string group = c == 1   ? fmt::format("{} consecutive GPUs", t)
                              : t == 1 ? fmt::format("{} consecutive GPUs, one per context-parallel rank", c)
                                       : fmt::format("{} context-parallel ranks of {} consecutive GPUs each", c, t);
    const std::string second = R > 1 ? fmt::format("; replica 1's at GPUs {}", firsts(1)) : std::string();
    fmt::print(*report, "{}: each device is a group of {} GPUs{} ({}); replica 0's devices start at GPUs {}{}; nodes of {} "
               "GPUs\n",
               t > 1 && c > 1 ? "tensor and context parallel" : t > 1 ? "tensor parallel" : "context parallel", t * c,
               planned.pipeline.sequence_parallel ? ", sequence parallel" : "", group, firsts(0), second,
               planned.cluster.gpus_per_node);
  }
  if (auto over = api::OverflowMessage(*sim)) return Fail("simulate", {*over, ErrorKind::kRuntime});
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
