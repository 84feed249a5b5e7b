// `twinpipe partition`: cut the config's model into one cell per stage and
// describe each cell (layers, cost, time, parameters, peak memory, bytes to
// the next cell), the bottleneck and the imbalance.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "api/commands.h"
#include "cli/commands.h"
#include "cli/fail.h"
#include "cli/schedule_io.h"
#include "cost_models/config.h"
#include "ir/builders.h"
#include "ir/units.h"

namespace twinpipe::cli {
namespace {

struct PartitionOptions {
  std::string config;
  std::string algorithm;
  bool json = false;
};

std::string Human(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 5) {
    v /= 1000;
    ++i;
  }
  return fmt::format("{:.3g} {}{}", v, prefixes[i], unit);
}

int Run(const PartitionOptions& o) {
  auto config = cost::LoadConfigFile(o.config);
  if (!config) return Fail("partition", config.error());
  // --algo's name is checked against the table by CLI11.
  auto report = api::PartitionConfig(*config, o.algorithm);
  if (!report) return Fail("partition", report.error());
  for (const std::string& note : api::PartitionNotes(*config, o.algorithm, *report)) {
    fmt::print(stderr, "twinpipe partition: note: {}\n", note);
  }
  const auto& layers = config->model.layers;
  if (o.json) {
    fmt::print("{}", api::PartitionJson(*config, *report));
    return kExitOk;
  }
  const bool staged = config->pipeline.Chunks() > 1;
  const std::string stages =
      staged ? fmt::format(", {} a device", report->cells.size() / config->pipeline.stages) : "";
  fmt::print("{}: {} partition of {} layers into {} cells{} ({}; times per micro-batch of {} samples)\n",
             o.config, report->algorithm, layers.size(), report->cells.size(), stages,
             report->user_costs ? "balancing the layers' given costs" : "balancing predicted time",
             config->training.MicroBatchSize());
  fmt::print("{:>4}  {:<24} {:<12} {:>11} {:>11} {:>10} {:>12} {:>11}\n", "cell", "layers", "device", "cost",
             "time", "params", "peak memory", "to next");
  for (size_t k = 0; k < report->cells.size(); ++k) {
    const auto& c = report->cells[k];
    const std::string span = fmt::format("{}..{} ({}..{})", c.first_layer, c.last_layer,
                                         layers[c.first_layer].name, layers[c.last_layer].name);
    fmt::print("{:>4}  {:<24} {:<12} {:>11} {:>11} {:>10} {:>12} {:>11}\n", k, span,
               config->cluster.devices[c.device].name,
               report->user_costs ? fmt::format("{:.4g}", c.cost) : Human(c.cost, "s"), Human(c.time_s, "s"),
               Human(c.params, ""), GiB(c.peak_memory_bytes), c.boundary_bytes > 0 ? Human(c.boundary_bytes, "B") : "-");
  }
  fmt::print("bottleneck {} per micro-batch; imbalance {:.3f} (slowest / mean cell)\n",
             Human(report->bottleneck_s, "s"), report->imbalance);
  return kExitOk;
}

}  // namespace

void AddPartition(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PartitionOptions>();
  CLI::App* cmd = app.add_subcommand("partition", "Cut the model into one cell per pipeline stage");
  cmd->add_option("config", o->config, "config JSON")->required();
  const std::vector<std::string> algorithms = ir::Names(cost::kPartitionAlgorithmNames);
  cmd->add_option("--algo", o->algorithm,
                  fmt::format("{} (default: the config's pipeline.partition)", fmt::join(algorithms, " | ")))
      ->check(CLI::IsMember(algorithms));
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace twinpipe::cli
