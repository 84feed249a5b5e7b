// `twinpipe compare`: prediction against measurement, op by op.
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "api/execution.h"
#include "cli/commands.h"
#include "cli/fail.h"
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
  bool summary = false;
  std::string svg;
};

int Run(const CompareOptions& o) {
  auto report = ReportStream({{"--svg", o.svg}});
  if (!report) return Fail("compare", report.error());
  traces::Trace t[2];
  const std::string* paths[2] = {&o.predicted, &o.measured};
  for (int i = 0; i < 2; ++i) {
    auto trace = LoadTrace(*paths[i]);
    if (!trace) return Fail("compare", trace.error());
    t[i] = std::move(*trace);
  }
  auto c = api::CompareNamed(t[0], t[1], o.predicted, o.measured);
  if (!c) return Fail("compare", c.error());
  if (!o.svg.empty()) {
    if (auto ok = WriteOutput(o.svg, traces::RenderTimelineSvg(t[0], &t[1], "predicted", "measured")); !ok) {
      return Fail("compare", ok.error());
    }
  }
  if (o.summary) {
    double peak_p = 0, peak_m = 0;
    for (const auto& d : c->devices) {
      peak_p = std::max(peak_p, d.peak_memory_predicted);
      peak_m = std::max(peak_m, d.peak_memory_measured);
    }
    fmt::print(*report, "{:>10.3f} {:>10.3f} {:>+7.1f}% {:>8.3f} {:>8.3f} {:>10.2f} {:>10.2f} {:>+7.1f}%\n", c->step_time_predicted_s * 1e3,
               c->step_time_measured_s * 1e3, 100 * c->step_time_error, c->bubble_fraction_predicted,
               c->bubble_fraction_measured, peak_p / 1048576, peak_m / 1048576, 100 * (peak_p - peak_m) / peak_m);
    return kExitOk;
  }
  fmt::print(*report, "{}", o.json ? traces::ComparisonJson(*c) : traces::ComparisonTable(*c));
  return kExitOk;
}

}  // namespace

void AddCompare(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand("compare", "Hold a predicted trace against a measured one, op by op");
  cmd->add_option("predicted", o->predicted, "predicted trace (simulate --trace)")->required();
  cmd->add_option("measured", o->measured, "measured trace (execute --trace)")->required();
  CLI::Option* json = cmd->add_flag("--json", o->json, "print one JSON object");
  // One line or one JSON object: asked for both, one would be ignored.
  cmd->add_flag("--summary", o->summary,
                "print one line: step time predicted, measured (ms), error; bubble predicted, measured; "
                "peak memory predicted, measured (MiB, largest device), error")
      ->excludes(json);
  cmd->add_option("--svg", o->svg, "also draw both timelines, interleaved, to this SVG");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace twinpipe::cli
