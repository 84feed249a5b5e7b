#include "traces/svg_timeline.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ir/units.h"

namespace twinpipe::traces {
namespace {

constexpr double kWidth = 1400, kLeft = 130, kRight = 20, kTop = 70;
constexpr double kComputeRow = 18, kCommRow = 7, kRowGap = 3, kDeviceGap = 10, kMemoryHeight = 46;

const char* Colour(ir::OpKind k) {
  switch (k) {
    case ir::OpKind::kForward: return "#4e79a7";
    case ir::OpKind::kBackward: return "#59a14f";
    case ir::OpKind::kBackwardInput: return "#8cd17d";
    case ir::OpKind::kBackwardWeight: return "#2f6e2a";
    case ir::OpKind::kRecompute: return "#f28e2b";
    case ir::OpKind::kSendF:
    case ir::OpKind::kSendB: return "#8c8c8c";
    case ir::OpKind::kRecvF:
    case ir::OpKind::kRecvB: return "#bab0ac";
    case ir::OpKind::kAllReduce: return "#b07aa1";
    case ir::OpKind::kStep: return "#333333";
  }
  return "#000000";
}

double Origin(const Trace& t) {
  double first = INFINITY;
  for (const Event& e : t.events) first = std::min(first, e.start_s);
  return std::isfinite(first) ? first : 0;
}

double Span(const Trace& t) {
  double last = 0;
  const double origin = Origin(t);
  for (const Event& e : t.events) last = std::max(last, e.end_s - origin);
  return last;
}

// A tick step of 1, 2 or 5 x 10^k seconds giving about 10 ticks.
double TickStep(double span) {
  const double raw = span / 10;
  const double p = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

std::string TimeLabel(double s) {
  if (s == 0) return "0";
  if (s >= 1) return fmt::format("{:g} s", s);
  if (s >= 1e-3) return fmt::format("{:g} ms", s * 1e3);
  return fmt::format("{:g} us", s * 1e6);
}

}  // namespace

std::string RenderTimelineSvg(const Trace& a, const Trace* b, const std::string& label, const std::string& vs_label) {
  std::vector<std::pair<const Trace*, std::string>> traces = {{&a, label}};
  if (b) traces.emplace_back(b, vs_label);
  double span = 0;
  for (const auto& [t, name] : traces) span = std::max(span, Span(*t));
  if (span <= 0) span = 1;
  const double plot = kWidth - kLeft - kRight;
  auto x = [&](double s) { return kLeft + s / span * plot; };
  const int devices = a.devices;
  const double per_trace = kComputeRow + kRowGap + kCommRow + kRowGap;
  const double per_device = per_trace * traces.size() + kDeviceGap;
  const double timeline_bottom = kTop + devices * per_device;
  const double memory_top = timeline_bottom + 30;
  const double height = memory_top + devices * (kMemoryHeight + 8) + 30;

  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(it,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{:.0f}\" viewBox=\"0 0 {} {:.0f}\" "
                 "font-family=\"Helvetica, Arial, sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
                 kWidth, height, kWidth, height);
  // Legend.
  double lx = 10;
  const std::pair<const char*, ir::OpKind> legend[] = {
      {"F forward", ir::OpKind::kForward},        {"B backward", ir::OpKind::kBackward},
      {"I input grad", ir::OpKind::kBackwardInput}, {"W weight grad", ir::OpKind::kBackwardWeight},
      {"R recompute", ir::OpKind::kRecompute},    {"send", ir::OpKind::kSendF},
      {"recv", ir::OpKind::kRecvF},               {"all-reduce", ir::OpKind::kAllReduce},
      {"step", ir::OpKind::kStep}};
  for (const auto& [text, kind] : legend) {
    fmt::format_to(it, "<rect x=\"{:.1f}\" y=\"30\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                       "<text x=\"{:.1f}\" y=\"40\" font-size=\"11\">{}</text>\n",
                   lx, Colour(kind), lx + 16, text);
    lx += 16 + 8 * std::string_view(text).size() + 14;
  }
  fmt::format_to(it, "<text x=\"10\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{}{}: {} devices{}, {} stages, "
                 "{} micro-batches</text>\n",
                 label, b ? " vs " + vs_label : "", a.devices,
                 a.tensor_parallel > 1 ? fmt::format(" of {} GPUs each (device d: GPUs {} d .. {} d + {})", a.tensor_parallel,
                                                     a.tensor_parallel, a.tensor_parallel, a.tensor_parallel - 1)
                                       : "",
                 a.stages, a.micro_batches);
  // Time axis with grid lines.
  const double step = TickStep(span);
  for (double t = 0; t <= span * 1.0001; t += step) {
    fmt::format_to(it, "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3}\" font-size=\"10\" text-anchor=\"middle\">{4}</text>\n",
                   x(t), kTop - 8, timeline_bottom, kTop - 12, TimeLabel(t));
  }
  // Rows.
  for (int d = 0; d < devices; ++d) {
    for (size_t k = 0; k < traces.size(); ++k) {
      const Trace& t = *traces[k].first;
      const double origin = Origin(t);
      const double y = kTop + d * per_device + k * per_trace;
      const std::string name = traces.size() > 1 ? fmt::format("device {} {}", d, traces[k].second) : fmt::format("device {}", d);
      fmt::format_to(it, "<text x=\"{:.0f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{}</text>\n", kLeft - 6,
                     y + kComputeRow - 5, name);
      fmt::format_to(it, "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"#f0f0f0\"/>\n", kLeft, y, plot,
                     kComputeRow);
      fmt::format_to(it, "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"#f7f7f7\"/>\n", kLeft,
                     y + kComputeRow + kRowGap, plot, kCommRow);
      for (const Event& e : t.events) {
        if (e.device != d) continue;
        const bool compute = e.stream == Stream::kCompute;
        const double x0 = x(e.start_s - origin), w = std::max(0.6, x(e.end_s - origin) - x0);
        const double ey = compute ? y : y + kComputeRow + kRowGap;
        const double eh = compute ? kComputeRow : kCommRow;
        fmt::format_to(it, "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" stroke=\"white\" "
                           "stroke-width=\"0.4\"><title>{} {:.6g}-{:.6g} s</title></rect>\n",
                       x0, ey, w, eh, Colour(e.kind),
                       ir::OpToken(ir::Op{.kind = e.kind, .stage = e.stage, .micro_batch = e.micro_batch}),
                       e.start_s - origin, e.end_s - origin);
        const std::string mb = e.micro_batch >= 0 ? std::to_string(e.micro_batch) : "";
        if (compute && !mb.empty() && w >= 6.5 * mb.size() + 3) {
          fmt::format_to(it, "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" fill=\"white\" text-anchor=\"middle\">{}</text>\n",
                         x0 + w / 2, y + kComputeRow - 5, mb);
        }
      }
    }
  }
  // Memory curves: one panel per device, every trace drawn in it.
  fmt::format_to(it, "<text x=\"10\" y=\"{:.1f}\" font-size=\"12\" font-weight=\"bold\">memory per device{}</text>\n",
                 memory_top - 10, b ? " (solid: " + label + ", dashed: " + vs_label + ")" : "");
  for (int d = 0; d < devices; ++d) {
    const double top = memory_top + d * (kMemoryHeight + 8);
    double peak = 0;
    for (const auto& [t, name] : traces) {
      if (d < static_cast<int>(t->memory.size())) {
        for (const auto& s : t->memory[d]) peak = std::max(peak, s.bytes);
      }
    }
    fmt::format_to(it, "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#ddd\"/>\n"
                       "<text x=\"{:.0f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">device {}</text>"
                       "<text x=\"{:.0f}\" y=\"{:.1f}\" font-size=\"9\" text-anchor=\"end\" fill=\"#555\">{}</text>\n",
                   kLeft, top, plot, kMemoryHeight, kLeft - 6, top + 14, d, kLeft - 6, top + 28,
                   peak > 0 ? "peak " + Bytes(peak) : "not measured");
    if (peak <= 0) continue;
    for (size_t k = 0; k < traces.size(); ++k) {
      const Trace& t = *traces[k].first;
      if (d >= static_cast<int>(t.memory.size()) || t.memory[d].empty()) continue;
      const double origin = Origin(t);
      std::string points;
      double prev_y = top + kMemoryHeight;
      for (const auto& s : t.memory[d]) {
        const double px = x(std::max(0.0, s.time_s - origin)), py = top + kMemoryHeight - s.bytes / peak * (kMemoryHeight - 4);
        points += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", px, prev_y, px, py);
        prev_y = py;
      }
      points += fmt::format("{:.1f},{:.1f}", x(span), prev_y);
      fmt::format_to(it, "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.2\"{}/>\n", points,
                     k == 0 ? "#4e79a7" : "#e15759", k == 0 ? "" : " stroke-dasharray=\"4 2\"");
    }
  }
  out += "</svg>\n";
  return out;
}

}  // namespace twinpipe::traces
