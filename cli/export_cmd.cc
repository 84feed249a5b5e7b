// `twinpipe export megatron|torchtitan CONFIG`: the launch settings that run
// a config's plan (partition/launch_settings.h): Megatron-LM's command-line
// flags, or torchtitan's TOML sections, on stdout.
#include <memory>

#include <fmt/format.h>

#include "api/commands.h"
#include "cli/commands.h"
#include "cli/fail.h"
#include "cost_models/config.h"
#include "partition/launch_settings.h"

namespace twinpipe::cli {
namespace {

struct ExportOptions {
  std::string framework;
  std::string config;
  std::string schedule_csv;
};

int Run(const ExportOptions& o) {
  auto config = cost::LoadConfigFile(o.config);
  if (!config) return Fail("export", config.error());
  auto settings = api::ExportSettings(*config, o.config, o.framework, o.schedule_csv);
  if (!settings) return Fail("export", settings.error());
  for (const std::string& note : settings->notes) fmt::print(stderr, "twinpipe export: note: {}\n", note);
  fmt::print("{}", settings->text);
  return kExitOk;
}

}  // namespace

void AddExport(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Print the launch settings that run a config's plan: Megatron-LM's command-line flags "
                "(core_v0.15.3) or torchtitan's TOML sections (v0.2.2)");
  cmd->footer(std::string(partition::ExportLeftOut()));
  cmd->add_option("framework", o->framework, "megatron or torchtitan")
      ->required()
      ->check(CLI::IsMember({"megatron", "torchtitan"}));
  cmd->add_option("config", o->config, "twinpipe config (e.g. what `search -o` writes)")->required();
  cmd->add_option("--schedule-csv", o->schedule_csv,
                  "torchtitan: run this torch schedule CSV (`schedule --format torch-csv`) instead of a "
                  "schedule class (needed for naive, zb-h1, zb-h2 and auto)");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace twinpipe::cli
