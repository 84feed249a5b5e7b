// `twinpipe render`: a trace (or two, interleaved) as an SVG pipeline timeline.
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/fail.h"
#include "cli/schedule_io.h"
#include "traces/svg_timeline.h"
#include "traces/trace.h"

namespace twinpipe::cli {
namespace {

struct RenderOptions {
  std::string trace;
  std::string vs;
  std::string svg;
};

int Run(const RenderOptions& o) {
  auto a = LoadTrace(o.trace);
  if (!a) return Fail("render", a.error());
  Result<traces::Trace> b = traces::Trace{};
  if (!o.vs.empty()) {
    b = LoadTrace(o.vs);
    if (!b) return Fail("render", b.error());
    if (b->devices != a->devices) {
      return Fail("render", {fmt::format("{} has {} devices, {} has {}", o.trace, a->devices, o.vs, b->devices)});
    }
  }
  const std::string svg = traces::RenderTimelineSvg(*a, o.vs.empty() ? nullptr : &*b, a->source,
                                                    o.vs.empty() ? "" : b->source);
  if (auto ok = WriteOutput(o.svg, svg); !ok) return Fail("render", ok.error());
  return kExitOk;
}

}  // namespace

void AddRender(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<RenderOptions>();
  CLI::App* cmd = app.add_subcommand("render", "Draw a trace as an SVG pipeline timeline");
  cmd->add_option("trace", o->trace, "trace JSON (from simulate or execute)")->required();
  cmd->add_option("--vs", o->vs, "a second trace of the same devices, drawn interleaved");
  cmd->add_option("--svg", o->svg, "output SVG file")->required();
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace twinpipe::cli
