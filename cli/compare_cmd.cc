// `twinpipe compare`: prediction against measurement, op by op.
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/schedule_io.h"
#include "traces/compare.h"
#include "traces/svg_timeline.h"
#include "traces/trace.h"

namespace twinpipe::cli {
namespace {

struct CompareOptions {
  std::string predicted;
  std::string measured;
  bool json = false;
  std::string svg;
};

int Run(const CompareOptions& o) {
  traces::Trace t[2];
  const std::string* paths[2] = {&o.predicted, &o.measured};
  for (int i = 0; i < 2; ++i) {
    auto text = ReadFile(*paths[i]);
    auto trace = text ? traces::ReadTraceJson(*text, *paths[i]) : Result<traces::Trace>(tl::unexpected(text.error()));
    if (!trace) {
      fmt::print(stderr, "twinpipe compare: {}\n", trace.error().message);
      return kExitBadInput;
    }
    t[i] = std::move(*trace);
  }
  auto c = traces::Compare(t[0], t[1]);
  if (!c) {
    fmt::print(stderr, "twinpipe compare: {} vs {}: {}\n", o.predicted, o.measured, c.error().message);
    return kExitBadInput;
  }
  if (!o.svg.empty()) {
    if (auto ok = WriteOutput(o.svg, traces::RenderTimelineSvg(t[0], &t[1], "predicted", "measured")); !ok) {
      fmt::print(stderr, "twinpipe compare: {}\n", ok.error().message);
      return kExitRuntime;
    }
  }
  fmt::print("{}", o.json ? traces::ComparisonJson(*c) : traces::ComparisonTable(*c));
  return kExitOk;
}

}  // namespace

void AddCompare(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand("compare", "Hold a predicted trace against a measured one, op by op");
  cmd->add_option("predicted", o->predicted, "predicted trace (simulate --trace)")->required();
  cmd->add_option("measured", o->measured, "measured trace (execute --trace)")->required();
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->add_option("--svg", o->svg, "also draw both timelines, interleaved, to this SVG");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace twinpipe::cli
