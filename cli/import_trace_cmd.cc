// `twinpipe import-trace`: torch.profiler traces of a torch.distributed.
// pipelining step (one per rank) as the measured trace of the schedule that
// ran, for `compare` and `render`.
#include <memory>

#include <fmt/format.h>

#include "api/execution.h"
#include "cli/commands.h"
#include "cli/fail.h"
#include "cli/schedule_io.h"
#include "traces/trace.h"

namespace twinpipe::cli {
namespace {

struct ImportOptions {
  std::vector<std::string> profiles;
  std::string schedule_file;
  std::string format = "auto";
  std::string dialect = "auto";
  std::string out;
};

int Run(const ImportOptions& o) {
  auto loaded = LoadSchedule(o.schedule_file, o.format, o.dialect);
  if (!loaded) return Fail("import-trace", loaded.error());
  auto m = api::ImportTrace(o.profiles, loaded->schedule);
  if (!m) return Fail("import-trace", m.error());
  if (auto ok = WriteOutput(o.out, traces::WriteTraceJson(m->trace)); !ok) return Fail("import-trace", ok.error());
  fmt::print(stderr, "twinpipe import-trace: {}\n", api::ImportSummary(*m));
  return kExitOk;
}

}  // namespace

void AddImportTrace(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ImportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "import-trace", "Read torch.profiler traces of a torch.distributed.pipelining step as a measured trace");
  cmd->add_option("profiles", o->profiles,
                  "one Chrome trace per rank (torch.profiler's export_chrome_trace, .json or .json.gz)")
      ->required();
  cmd->add_option("--schedule-file", o->schedule_file,
                  "the schedule that ran (twinpipe text, JSON, or the torch CSV torch ran)")
      ->required();
  cmd->add_option("--format", o->format, "schedule file format")->check(CLI::IsMember({"auto", "text", "json", "torch-csv"}));
  cmd->add_option("--dialect", o->dialect, "torch CSV dialect")->check(CLI::IsMember({"auto", "current", "older"}));
  cmd->add_option("-o,--out", o->out, "measured trace JSON (default: stdout)");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace twinpipe::cli
