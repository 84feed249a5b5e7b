// `twinpipe schedule`: build a schedule (naive, gpipe, 1f1b, interleaved,
// zb-h1, zb-h2, zb-v, dualpipev), add recompute
// and comm, verify it and print it as text, JSON or torch CSV.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "api/commands.h"
#include "cli/commands.h"
#include "cli/fail.h"
#include "cli/schedule_io.h"
#include "ir/json_format.h"
#include "ir/text_format.h"
#include "ir/torch_csv.h"
#include "cost_models/config.h"

namespace twinpipe::cli {
namespace {

struct ScheduleOptions {
  std::string config;
  int stages = 0;
  int micro_batches = 0;
  int chunks = 0;
  std::string schedule;
  std::string recompute;
  std::string recompute_timing = "overlapped";
  bool recompute_timing_flag = false;  // given on the command line
  std::string format = "text";
  std::string dialect;        // older: torch 2.5's form (kept for scripts; --torch-version says it)
  std::string torch_version;  // X.Y; default the newest twinpipe knows
  bool compute_only = false;
  int64_t activation_bytes = 0;
  int replicas = 1;
  std::string output;
};

int Run(const ScheduleOptions& o, bool stages_flag, bool micro_batches_flag) {
  const api::ScheduleRequest request{.stages = o.stages,
                                     .micro_batches = o.micro_batches,
                                     .chunks = o.chunks,
                                     .schedule = o.schedule,
                                     .recompute = o.recompute,
                                     .recompute_timing = o.recompute_timing,
                                     .activation_bytes = o.activation_bytes,
                                     .replicas = o.replicas};
  Result<ir::Schedule> built = Fail("no schedule");
  if (!o.config.empty()) {
    if (o.recompute_timing_flag) {
      return Fail("schedule", {fmt::format("--recompute-timing is for a schedule built without a CONFIG; set "
                                           "/pipeline/recompute_timing in {}", o.config)});
    }
    if (stages_flag || micro_batches_flag) {
      return Fail("schedule", {"give either a CONFIG or --stages and --microbatches, not both"});
    }
    auto config = cost::LoadConfigFile(o.config);
    if (!config) return Fail("schedule", config.error());
    built = api::BuildSchedule(&*config, request);
  } else {
    built = api::BuildSchedule(nullptr, request);
  }
  if (!built) return Fail("schedule", built.error());
  const ir::Schedule& s = *built;
  if (o.format != "torch-csv" && (!o.torch_version.empty() || o.compute_only || !o.dialect.empty())) {
    return Fail("schedule", {"--torch-version, --compute-only and --dialect are for --format torch-csv"});
  }
  std::string text;
  if (o.format == "text") {
    text = ir::PrintText(s);
  } else if (o.format == "json") {
    text = ir::PrintJson(s);
  } else {
    ir::TorchExportOptions options{.compute_only = o.compute_only};
    if (!o.dialect.empty() && !o.torch_version.empty()) {
      return Fail("schedule", {"give --torch-version only (--dialect older is --torch-version 2.5)"});
    }
    if (o.dialect == "older") options.version = {2, 5};
    if (!o.torch_version.empty()) {
      auto version = ir::ParseTorchVersion(o.torch_version);
      if (!version) return Fail("schedule", {"--torch-version: " + version.error().message});
      options.version = *version;
    }
    ir::TorchExportNotes notes;
    auto csv = ir::ExportTorchCsv(s, options, &notes);
    if (!csv) return Fail("schedule", {"--format torch-csv: " + csv.error().message});
    text = std::move(*csv);
    if (notes.dropped) {
      fmt::print(stderr, "twinpipe schedule: torch CSV has no action for STEP, ALLREDUCE or R: "
                         "{} ops left out\n", notes.dropped);
    }
    for (const std::string& w : notes.warnings) fmt::print(stderr, "twinpipe schedule: warning: {}\n", w);
  }
  if (auto ok = WriteOutput(o.output, text); !ok) return Fail("schedule", ok.error());
  return kExitOk;
}

}  // namespace

void AddSchedule(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ScheduleOptions>();
  CLI::App* cmd = app.add_subcommand(
      "schedule", "Build a pipeline schedule, insert recompute and comm, verify it and print it");
  cmd->add_option("config", o->config,
                  "config JSON (optional): stages, micro-batches, replicas, schedule and recompute from it, "
                  "comm bytes from its model cut by its partition");
  auto* stages = cmd->add_option("--stages,-k", o->stages, "pipeline devices K (K x chunks stages)")
                     ->check(CLI::Range(1, 1 << 24));
  auto* micro = cmd->add_option("--microbatches,-m", o->micro_batches, "micro-batches M per mini-batch")
                    ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--schedule,-s", o->schedule,
                  fmt::format("{} (default gpipe; auto needs a CONFIG, whose model gives its costs)",
                              fmt::join(ir::ScheduleNames(), " | ")));
  cmd->add_option("--chunks,-v", o->chunks, "stages per device: interleaved >= 2 (default 2), zb-v 2, others 1")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--recompute", o->recompute, "none | full | except-last, or with a CONFIG selective (default none)");
  auto* timing = cmd->add_option("--recompute-timing", o->recompute_timing,
                  "overlapped (R before its gradient's receive) | in-backward (after it, as Megatron-LM); "
                  "without a CONFIG (a config's /pipeline/recompute_timing says it)")
      ->check(CLI::IsMember({"overlapped", "in-backward"}));
  cmd->add_option("--format", o->format, "output format")
      ->check(CLI::IsMember({"text", "json", "torch-csv"}));
  cmd->add_option("--torch-version", o->torch_version,
                  fmt::format("torch release whose schedule CSV to write, X.Y in {}.{} to {}.{} (default {}.{}): its "
                              "action names, and with comm the REDUCE_GRAD (2.10 on) and waits (2.15) it needs",
                              ir::kOldestTorch.major, ir::kOldestTorch.minor, ir::kNewestTorch.major,
                              ir::kNewestTorch.minor, ir::kNewestTorch.major, ir::kNewestTorch.minor));
  cmd->add_flag("--compute-only", o->compute_only,
                "torch CSV of compute actions only, for _load_csv(format=\"compute_only\"), which adds comm itself");
  cmd->add_option("--dialect", o->dialect, "older: torch 2.5's names (B, W), as --torch-version 2.5; current: the default")
      ->check(CLI::IsMember({"current", "older"}));
  cmd->add_option("--activation-bytes", o->activation_bytes,
                  "bytes per micro-batch sent across each stage boundary (both directions)")
      ->check(CLI::Range(int64_t{0}, INT64_MAX));
  // (with a CONFIG the bytes come from the model instead)
  cmd->add_option("--replicas", o->replicas, "data-parallel replicas (adds ALLREDUCE when > 1)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-o,--output", o->output, "output file (default stdout)");
  cmd->callback([o, stages, micro, timing, &exit_code] {
    o->recompute_timing_flag = timing->count() > 0;
    exit_code = Run(*o, stages->count() > 0, micro->count() > 0);
  });
}

}  // namespace twinpipe::cli
