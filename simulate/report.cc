#include "simulate/report.h"

#include <array>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ir/units.h"
#include "traces/schedule_trace.h"

namespace twinpipe::simulate {
namespace {

std::vector<const ir::Op*> OpsById(const ir::Schedule& s) {
  std::vector<const ir::Op*> ops(s.NumOps());
  int32_t id = 0;
  for (const auto& p : s.programs) {
    for (const auto& op : p) ops[id++] = &op;  // Simulate numbers ops canonically
  }
  return ops;
}

std::string Seconds(double s) {
  if (s >= 1) return fmt::format("{:.4g} s", s);
  if (s >= 1e-3) return fmt::format("{:.4g} ms", s * 1e3);
  return fmt::format("{:.4g} us", s * 1e6);
}

}  // namespace

traces::Trace ToTrace(const ir::Schedule& s, const SimResult& r, const std::string& source) {
  traces::Trace t = traces::TraceFor(s, source);
  for (traces::Event& e : t.events) {
    e.start_s = r.start_s[e.id];
    e.end_s = r.end_s[e.id];
  }
  t.memory.resize(r.memory.size());
  for (size_t d = 0; d < r.memory.size(); ++d) {
    for (const auto& [time, bytes] : r.memory[d]) t.memory[d].push_back({time, bytes});
  }
  return t;
}

std::string SummaryJson(const ir::Schedule& s, const SimResult& r, double samples,
                        const std::vector<std::string>* extrapolation) {
  const auto ops = OpsById(s);
  nlohmann::ordered_json j;
  j["step_time_s"] = r.step_time_s;
  j["throughput_samples_per_s"] = r.step_time_s > 0 ? samples / r.step_time_s : 0.0;
  j["bubble_fraction"] = r.bubble_fraction;
  j["overlapped_step_time_s"] = r.overlapped_step_s;
  j["overlapped_bubble_fraction"] = r.overlapped_bubble_fraction;
  j["devices"] = nlohmann::ordered_json::array();
  for (size_t d = 0; d < r.devices.size(); ++d) {
    const auto& dev = r.devices[d];
    j["devices"].push_back({{"device", d},
                            {"busy_s", dev.busy_s},
                            {"peak_memory_bytes", dev.peak_memory_bytes},
                            {"peak_memory_op", dev.peak_op >= 0 ? ir::OpToken(*ops[dev.peak_op]) : "start"}});
  }
  j["links"] = nlohmann::ordered_json::array();
  for (const auto& l : r.links) {
    j["links"].push_back({{"src", l.src}, {"dst", l.dst}, {"bytes", l.bytes}, {"busy_s", l.busy_s}});
  }
  j["peak_in_flight"] = r.peak_in_flight;
  j["critical_path"] = nlohmann::ordered_json::array();
  for (int32_t id : r.critical_path) {
    j["critical_path"].push_back({{"id", id},
                                  {"device", ops[id]->device},
                                  {"op", ir::OpToken(*ops[id])},
                                  {"start_s", r.start_s[id]},
                                  {"end_s", r.end_s[id]}});
  }
  if (extrapolation) j["extrapolation"] = *extrapolation;
  return j.dump(2) + "\n";
}

std::string SummaryTable(const ir::Schedule& s, const SimResult& r, double samples) {
  const auto ops = OpsById(s);
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(it, "step time {}   throughput {:.4g} samples/s   bubble {:.2f}%\n", Seconds(r.step_time_s),
                 r.step_time_s > 0 ? samples / r.step_time_s : 0.0, 100 * r.bubble_fraction);
  fmt::format_to(it, "steps overlapped (each device's span, as with post-validation): {}   bubble {:.2f}%\n",
                 Seconds(r.overlapped_step_s), 100 * r.overlapped_bubble_fraction);
  fmt::format_to(it, "{:>6}  {:>12}  {:>6}  {:>12}  {}\n", "device", "busy", "busy%", "peak memory", "peak at");
  for (size_t d = 0; d < r.devices.size(); ++d) {
    const auto& dev = r.devices[d];
    fmt::format_to(it, "{:>6}  {:>12}  {:>5.1f}%  {:>12}  {}\n", d, Seconds(dev.busy_s),
                   r.step_time_s > 0 ? 100 * dev.busy_s / r.step_time_s : 0.0, GiB(dev.peak_memory_bytes),
                   dev.peak_op >= 0 ? ir::OpToken(*ops[dev.peak_op]) : "start");
  }
  if (!r.links.empty()) {
    fmt::format_to(it, "{:>8}  {:>12}  {:>12}\n", "link", "bytes", "busy");
    for (const auto& l : r.links) {
      fmt::format_to(it, "{:>3} -> {:<2}  {:>12}  {:>12}\n", l.src, l.dst, l.bytes, Seconds(l.busy_s));
    }
  }
  std::map<std::string, double> by_kind;
  for (int32_t id : r.critical_path) by_kind[std::string(ir::OpKindName(ops[id]->kind))] += r.end_s[id] - r.start_s[id];
  std::vector<std::string> parts;
  for (const auto& [k, t] : by_kind) parts.push_back(fmt::format("{} {}", k, Seconds(t)));
  fmt::format_to(it, "critical path: {} ops ({})\n", r.critical_path.size(), fmt::join(parts, ", "));
  return out;
}

}  // namespace twinpipe::simulate
