// The pipeline timeline as SVG, as in GPipe's Figure 2c: a row per device
// (compute, and a thin row beneath for transfers and all-reduce), boxes
// coloured by op kind and labelled with the micro-batch, idle time visible
// as bare background, and a memory curve per device beneath. With a second
// trace (--vs), its rows are interleaved with the first's on one time axis.
//
//   std::string svg = RenderTimelineSvg(predicted, &measured, "predicted", "measured");
#pragma once

#include <string>

#include "traces/trace.h"

namespace twinpipe::traces {

std::string RenderTimelineSvg(const Trace& trace, const Trace* vs, const std::string& label,
                              const std::string& vs_label);

}  // namespace twinpipe::traces
