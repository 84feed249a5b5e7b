// `twinpipe schedule`: build a schedule (naive, gpipe, 1f1b), add recompute
// and comm, verify it and print it as text, JSON or torch CSV.
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/schedule_io.h"
#include "ir/builders.h"
#include "ir/json_format.h"
#include "ir/passes.h"
#include "ir/text_format.h"
#include "ir/torch_csv.h"
#include "ir/verifier.h"

namespace twinpipe::cli {
namespace {

struct ScheduleOptions {
  std::string config;
  int stages = 0;
  int micro_batches = 0;
  std::string schedule;
  std::string recompute;
  std::string format = "text";
  std::string dialect = "current";
  int64_t activation_bytes = 0;
  int replicas = 1;
  std::string output;
};

// Reads the pipeline part of a config (DESIGN.md section 6): pipeline.stages,
// pipeline.schedule, pipeline.recompute and training.microbatches. Flags given
// on the command line win.
Result<void> ReadPipelineConfig(ScheduleOptions& o, bool stages_flag, bool micro_batches_flag) {
  auto text = ReadFile(o.config);
  if (!text) return tl::unexpected(text.error());
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& e) {
    return Fail(fmt::format("{}: not valid JSON: {}", o.config, e.what()));
  }
  auto section = [&](const char* name) -> Result<const nlohmann::json*> {
    if (!doc.is_object()) return Fail(fmt::format("{}: /: expected an object", o.config));
    auto it = doc.find(name);
    if (it == doc.end()) return static_cast<const nlohmann::json*>(nullptr);
    if (!it->is_object()) return Fail(fmt::format("{}: /{}: expected an object", o.config, name));
    return &*it;
  };
  auto integer = [&](const nlohmann::json* sec, const char* sec_name, const char* key,
                     int& dst) -> Result<void> {
    if (!sec || !sec->contains(key)) return {};
    const auto& v = (*sec)[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (1 << 24)) {
      return Fail(fmt::format("{}: /{}/{}: expected an integer from 1 to {}, got {}", o.config,
                              sec_name, key, 1 << 24, v.dump()));
    }
    dst = v.get<int>();
    return {};
  };
  auto string = [&](const nlohmann::json* sec, const char* sec_name, const char* key,
                    std::string& dst) -> Result<void> {
    if (!sec || !sec->contains(key)) return {};
    const auto& v = (*sec)[key];
    if (!v.is_string()) {
      return Fail(fmt::format("{}: /{}/{}: expected a string, got {}", o.config, sec_name, key, v.dump()));
    }
    dst = v.get<std::string>();
    return {};
  };
  auto pipeline = section("pipeline");
  if (!pipeline) return tl::unexpected(pipeline.error());
  auto training = section("training");
  if (!training) return tl::unexpected(training.error());
  int stages = o.stages, micro_batches = o.micro_batches;
  std::string schedule, recompute;
  for (auto r : {integer(*pipeline, "pipeline", "stages", stages),
                 integer(*training, "training", "microbatches", micro_batches),
                 string(*pipeline, "pipeline", "schedule", schedule),
                 string(*pipeline, "pipeline", "recompute", recompute)}) {
    if (!r) return r;
  }
  if (!stages_flag) o.stages = stages;
  if (!micro_batches_flag) o.micro_batches = micro_batches;
  if (o.schedule.empty()) o.schedule = schedule;
  if (o.recompute.empty()) o.recompute = recompute;
  if (o.stages == 0) return Fail(fmt::format("{}: /pipeline/stages: missing (or pass --stages)", o.config));
  if (o.micro_batches == 0) {
    return Fail(fmt::format("{}: /training/microbatches: missing (or pass --microbatches)", o.config));
  }
  return {};
}

int Run(ScheduleOptions o, bool stages_flag, bool micro_batches_flag) {
  if (!o.config.empty()) {
    if (auto ok = ReadPipelineConfig(o, stages_flag, micro_batches_flag); !ok) {
      fmt::print(stderr, "twinpipe schedule: {}\n", ok.error().message);
      return kExitBadInput;
    }
  } else if (o.stages == 0 || o.micro_batches == 0) {
    fmt::print(stderr, "twinpipe schedule: give a CONFIG, or both --stages and --microbatches\n");
    return kExitBadInput;
  }
  if (o.schedule.empty()) o.schedule = "gpipe";
  if (o.recompute.empty()) o.recompute = "none";
  auto built = ir::BuildByName(o.schedule, o.stages, o.micro_batches);
  if (!built) {
    fmt::print(stderr, "twinpipe schedule: {}\n", built.error().message);
    return kExitBadInput;
  }
  auto mode = ir::RecomputeModeFromName(o.recompute);
  if (!mode) {
    fmt::print(stderr, "twinpipe schedule: recompute '{}': expected none, full or except-last\n",
               o.recompute);
    return kExitBadInput;
  }
  ir::Schedule s = std::move(*built);
  s.replicas = o.replicas;
  ir::InsertRecompute(s, *mode);
  const std::vector<int64_t> boundary(std::max(0, o.stages - 1), o.activation_bytes);
  if (auto ok = ir::InsertComm(s, ir::CommBytes{boundary, boundary}); !ok) {
    fmt::print(stderr, "twinpipe schedule: {}\n", ok.error().message);
    return kExitRuntime;
  }
  ir::InsertAllReduce(s, {});
  if (auto diagnostics = ir::Verify(s); !diagnostics.empty()) {
    // A builder bug, not bad input: say so with the first diagnostics.
    fmt::print(stderr, "twinpipe schedule: internal error: the built schedule does not verify:\n");
    for (size_t i = 0; i < std::min<size_t>(diagnostics.size(), 20); ++i) {
      fmt::print(stderr, "  {}\n", ir::FormatDiagnostic(s, diagnostics[i]));
    }
    return kExitRuntime;
  }
  std::string text;
  if (o.format == "text") {
    text = ir::PrintText(s);
  } else if (o.format == "json") {
    text = ir::PrintJson(s);
  } else {
    int dropped = 0;
    text = ir::ExportTorchCsv(s, *ir::TorchDialectFromName(o.dialect), &dropped);
    if (dropped) {
      fmt::print(stderr, "twinpipe schedule: torch CSV has no action for STEP, ALLREDUCE or R: "
                         "{} ops left out\n", dropped);
    }
  }
  if (auto ok = WriteOutput(o.output, text); !ok) {
    fmt::print(stderr, "twinpipe schedule: {}\n", ok.error().message);
    return kExitRuntime;
  }
  return kExitOk;
}

}  // namespace

void AddSchedule(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ScheduleOptions>();
  CLI::App* cmd = app.add_subcommand(
      "schedule", "Build a pipeline schedule, insert recompute and comm, verify it and print it");
  cmd->add_option("config", o->config, "config JSON whose pipeline section to read (optional)");
  auto* stages = cmd->add_option("--stages,-k", o->stages, "stages K (one per device)")
                     ->check(CLI::Range(1, 1 << 24));
  auto* micro = cmd->add_option("--microbatches,-m", o->micro_batches, "micro-batches M per mini-batch")
                    ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--schedule,-s", o->schedule, "naive | gpipe | 1f1b (default gpipe)");
  cmd->add_option("--recompute", o->recompute, "none | full | except-last (default none)");
  cmd->add_option("--format", o->format, "output format")
      ->check(CLI::IsMember({"text", "json", "torch-csv"}));
  cmd->add_option("--dialect", o->dialect, "torch CSV dialect to write")
      ->check(CLI::IsMember({"current", "older"}));
  cmd->add_option("--activation-bytes", o->activation_bytes,
                  "bytes per micro-batch sent across each stage boundary (both directions)")
      ->check(CLI::Range(int64_t{0}, INT64_MAX));
  cmd->add_option("--replicas", o->replicas, "data-parallel replicas (adds ALLREDUCE when > 1)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-o,--output", o->output, "output file (default stdout)");
  cmd->callback([o, stages, micro, &exit_code] {
    exit_code = Run(*o, stages->count() > 0, micro->count() > 0);
  });
}

}  // namespace twinpipe::cli
