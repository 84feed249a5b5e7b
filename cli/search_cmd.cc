// `twinpipe search`: simulate every tensor- / context-parallel / stages /
// replicas / micro-batches / schedule / chunks / recompute / sharding /
// partition point, drop those over the memory cap, rank the rest, print the
// Pareto front and write the best as a config; or, with --max-layers, how
// deep a generator model can grow per K.
#include <unistd.h>

#include <chrono>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/commands.h"
#include "cli/commands.h"
#include "cli/fail.h"
#include "cli/plan_source.h"
#include "cli/schedule_io.h"
#include "ir/units.h"
#include "search/search.h"

namespace twinpipe::cli {
namespace {

struct SearchCmdOptions {
  std::string config;
  int devices = 0;
  double memory_cap = 0;
  std::string objective = "throughput";
  bool json = false;
  bool max_layers = false;
  std::string output;
  std::string calibration;
  api::SearchKnobs knobs;  // the grid's newer knobs
};

// A bar on stderr once the search has run for a second.
class Progress {
 public:
  void operator()(int64_t done, int64_t total) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < 1 && done < total) return;
    if (elapsed < 1 && !shown_) return;
    shown_ = true;
    if (!isatty(STDERR_FILENO)) {  // a log, not a terminal: one line when done
      if (done == total) fmt::print(stderr, "search: {} configs, {:.1f} s\n", total, elapsed);
      return;
    }
    const int width = 30;
    const int filled = total > 0 ? static_cast<int>(width * done / total) : width;
    fmt::print(stderr, "\rsearch [{:<{}}] {}/{} configs, {:.1f} s", std::string(filled, '#'), width, done, total,
               elapsed);
    if (done == total) fmt::print(stderr, "\n");
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  bool shown_ = false;
};

int RunMaxLayers(const SearchCmdOptions& o, const cost::Config& config, const search::SearchOptions& so) {
  auto rows = search::MaxLayers(config, so);
  if (!rows) return Fail("search", rows.error());
  if (o.json) {
    fmt::print("{}", api::MaxLayersJson(config, *rows));
    return kExitOk;
  }
  fmt::print("largest {} that fit, {} schedule, {} micro-batches:\n", config.generator == "mlp" ? "layer count" : "block count",
             config.pipeline.schedule, config.training.micro_batches);
  fmt::print("{:>6}  {:<10}  {:>10}  {:>12}\n", "stages", "recompute", "max layers", "peak memory");
  for (const auto& r : *rows) {
    fmt::print("{:>6}  {:<10}  {:>10}  {:>12}\n", r.stages, ir::RecomputeModeName(r.recompute), r.max_layers,
               GiB(r.peak_memory_bytes));
  }
  return kExitOk;
}

int Run(const SearchCmdOptions& o) {
  if (o.max_layers && !o.output.empty()) {
    return Fail("search", {"--max-layers prints the deepest model each pipeline fits, not one configuration: give "
                           "it without -o (--json writes the table)"});
  }
  auto report = ReportStream({{"-o", o.output}});
  if (!report) return Fail("search", report.error());
  auto config = cost::LoadConfigFile(o.config);
  if (!config) return Fail("search", config.error());
  auto calibration = LoadCalibration(o.calibration, *config);
  if (!calibration) return Fail("search", calibration.error());
  search::SearchOptions so;
  so.calibration = *calibration ? &**calibration : nullptr;
  so.devices = o.devices;
  so.memory_cap_bytes = o.memory_cap;
  so.objective = o.objective == "memory" ? search::Objective::kMemory : search::Objective::kThroughput;
  if (auto ok = api::ApplySearchKnobs(o.knobs, so); !ok) return Fail("search", ok.error());
  auto progress = std::make_shared<Progress>();
  so.progress = [progress](int64_t done, int64_t total) { (*progress)(done, total); };
  if (o.max_layers) return RunMaxLayers(o, *config, so);

  const int devices = o.devices > 0 ? o.devices : config->cluster.NumDevices();
  if (*calibration && (*calibration)->coverage) {
    // The candidates share the model and the GPUs; their parallelism varies.
    WarnExtrapolation("search", o.calibration,
                      "this model or GPU count, which every candidate shares; each prediction extrapolates",
                      cost::Extrapolations(*(*calibration)->coverage, cost::ModelCoverage(*config, devices)));
  }
  auto result = search::Search(*config, so);
  if (!result) return Fail("search", result.error());
  nlohmann::ordered_json best_config;
  if (result->best) {
    auto text = ReadFile(o.config);
    if (!text) return Fail("search", text.error());
    best_config = search::CandidateConfig(nlohmann::ordered_json::parse(*text), *result->best, devices, o.memory_cap);
    if (!o.output.empty()) {
      if (auto ok = WriteOutput(o.output, best_config.dump(2) + "\n"); !ok) return Fail("search", ok.error());
    }
  }
  if (o.json) {
    fmt::print(*report, "{}", api::SearchJson(*result, best_config));
    if (!result->best) fmt::print(stderr, "twinpipe search: nothing fits: every configuration exceeds the memory cap\n");
  } else {
    fmt::print(*report, "{} configs in {:.3f} s ({:.0f} per second): {} simulated, {} skipped on their bounds, "
               "{} over the memory cap\n",
               result->configs_evaluated, result->wall_s,
               result->wall_s > 0 ? static_cast<double>(result->configs_evaluated) / result->wall_s : 0.0,
               result->configs_simulated, result->configs_bounded, result->over_cap);
    if (!result->best) {
      // A runtime failure: its sentence on stderr, and no empty table.
      fmt::print(stderr, "twinpipe search: nothing fits: every configuration exceeds the memory cap\n");
      return kExitRuntime;
    }
    fmt::print(*report, "Pareto front, throughput against peak memory:\n");
    // e: expert-parallel GPUs, a column only for a mixture of experts.
    const bool moe = config->transformer && config->transformer->experts > 0;
    // t: "s" with sequence parallelism, "o" with its overlap; c: context-parallel GPUs.
    fmt::print(*report, "{:>4} {:>3} {:>3} {:>5}  {:<12} {:>2}  {:<11} {:<7} {:>11} {:>13} {:>7} {:>12} {:>4}  {:<9}", "t",
               "K", "R", "M", "schedule", "v", "recompute", "cut", "step", "samples/s", "bubble", "peak memory", "c",
               "sharding");
    fmt::print(*report, "{}\n", moe ? fmt::format(" {:>4}", "e") : "");
    for (const auto& c : result->pareto) {
      fmt::print(*report, "{:>4} {:>3} {:>3} {:>5}  {:<12} {:>2}  {:<11} {:<7} {:>8.3f} ms {:>13.4g} {:>6.2f}% {:>12} {:>4}  {:<9}",
                 fmt::format("{}{}{}", c.tensor_parallel, c.sequence_parallel ? "s" : "", c.tp_comm_overlap ? "o" : ""),
                 c.stages, c.replicas, c.micro_batches, c.schedule, c.chunks, ir::RecomputeModeName(c.recompute),
                 cost::PartitionAlgorithmName(c.partition), c.step_time_s * 1e3, c.throughput,
                 c.bubble_fraction * 100, GiB(c.peak_memory_bytes), c.context_parallel,
                 ir::NameOf(cost::kDataParallelShardingNames, c.sharding));
      fmt::print(*report, "{}\n", moe ? fmt::format(" {:>4}", c.expert_parallel) : "");
    }
    const auto& b = *result->best;
    {
      fmt::print(*report, "best for {}: {}{}K={} R={} M={} {}{} recompute {} partition {}{}{}\n", o.objective,
                 b.tensor_parallel > 1 ? fmt::format("t={}{} ", b.tensor_parallel,
                                                     b.tp_comm_overlap     ? " (sequence parallel, overlapped)"
                                                     : b.sequence_parallel ? " (sequence parallel)"
                                                                           : "")
                                       : "",
                 fmt::format("{}{}", b.context_parallel > 1 ? fmt::format("c={} ", b.context_parallel) : "",
                             b.expert_parallel > 1 ? fmt::format("e={} ", b.expert_parallel) : ""),
                 b.stages, b.replicas,
                 b.micro_batches, b.schedule, b.chunks > 1 ? fmt::format(" v={}", b.chunks) : "",
                 ir::RecomputeModeName(b.recompute), cost::PartitionAlgorithmName(b.partition),
                 b.sharding != cost::DataParallelSharding::kNone
                     ? fmt::format(" sharding {}", ir::NameOf(cost::kDataParallelShardingNames, b.sharding))
                     : "",
                 o.output.empty() ? "" : " (written to " + o.output + ")");
    }
  }
  return result->best ? kExitOk : kExitRuntime;
}

}  // namespace

void AddSearch(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SearchCmdOptions>();
  CLI::App* cmd = app.add_subcommand("search", "Simulate every pipeline configuration of a model and cluster; rank them");
  cmd->add_option("config", o->config, "config JSON: model, training (the global mini-batch) and cluster")->required();
  cmd->add_option("--devices", o->devices, "devices to use (default: the cluster's); K x replicas of them")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--memory-cap", o->memory_cap, "bytes a device may hold (default: its memory)")
      ->check(BytesValidator());
  cmd->add_option("--objective", o->objective, "throughput (default) or memory")
      ->check(CLI::IsMember({"throughput", "memory"}));
  cmd->add_flag("--max-layers", o->max_layers,
                "instead: the most layers a generator model can have per K, with and without recompute");
  cmd->add_flag("--json", o->json, "print configs_evaluated, wall_s, pareto[], best (a config); with --max-layers rows[]");
  cmd->add_option("-o,--output", o->output, "write the best configuration as a runnable config");
  cmd->add_option("--calibration", o->calibration, "cost-model coefficients fitted by `twinpipe calibrate` (the "
                                                   "config's device) in place of the catalogue's");
  cmd->add_option("--max-context-parallel", o->knobs.max_context_parallel,
                  "most context-parallel GPUs c to try (fused attention; default and 0: no limit but "
                  "--min-context-tokens)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--min-context-tokens", o->knobs.min_context_tokens,
                  "least tokens of a sample each context-parallel GPU keeps, seq / c (default 4096; 0: any)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--sharding", o->knobs.shardings,
                  "data-parallel sharding modes to try where a gradient spans GPUs (default: none optimizer full)")
      ->delimiter(',')
      ->check(CLI::IsMember(ir::Names(cost::kDataParallelShardingNames)));
  cmd->add_option("--tp-comm-overlap", o->knobs.tp_comm_overlap,
                  "tensor-parallel overlap with sequence parallelism: off, on or both (default)")
      ->check(CLI::IsMember({"off", "on", "both"}));
  cmd->add_option("--max-chunks", o->knobs.max_chunks, "most chunks per device of the interleaved schedule (default and "
                                                 "0: every v dividing the blocks per device)")
      ->check(CLI::Range(0, 1 << 16));
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace twinpipe::cli
