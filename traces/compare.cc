#include "traces/compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace twinpipe::traces {
namespace {

using Key = std::tuple<int32_t, int, int32_t, int32_t>;  // device, kind, stage, micro-batch

Key KeyOf(const Event& e) { return {e.device, static_cast<int>(e.kind), e.stage, e.micro_batch}; }

double Relative(double predicted, double measured) {
  return measured != 0 ? (predicted - measured) / measured : (predicted == 0 ? 0 : INFINITY);
}

std::string Token(const Event& e) {
  return ir::OpToken(ir::Op{.kind = e.kind, .stage = e.stage, .micro_batch = e.micro_batch});
}

// Each device's events in program order (ids are canonical: program order
// on each device).
std::vector<std::vector<const Event*>> Programs(const Trace& t) {
  std::vector<std::vector<const Event*>> programs(std::max(t.devices, 0));
  for (const Event& e : t.events) {
    if (e.device >= 0 && e.device < t.devices) programs[e.device].push_back(&e);
  }
  for (auto& program : programs) {
    std::stable_sort(program.begin(), program.end(), [](const Event* a, const Event* b) { return a->id < b->id; });
  }
  return programs;
}

// Where the two traces' programs first differ: the lowest device, then the
// first position (from 0) on it; empty when every device runs the same ops
// in the same order.
std::string FirstOrderDifference(const Trace& p, const Trace& m) {
  const auto predicted = Programs(p), measured = Programs(m);
  for (size_t d = 0; d < predicted.size() && d < measured.size(); ++d) {
    const auto& a = predicted[d];
    const auto& b = measured[d];
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      if (i < a.size() && i < b.size() && KeyOf(*a[i]) == KeyOf(*b[i])) continue;
      return fmt::format("device {}, position {}: predicted {}, measured {}", d, i,
                         i < a.size() ? Token(*a[i]) : "nothing", i < b.size() ? Token(*b[i]) : "nothing");
    }
  }
  return "";
}

}  // namespace

TraceSummary Summarize(const Trace& t) {
  TraceSummary s;
  s.busy_s.assign(t.devices, 0);
  s.peak_memory_bytes.assign(t.devices, 0);
  double first = INFINITY, last = -INFINITY;
  for (const Event& e : t.events) {
    first = std::min(first, e.start_s);
    last = std::max(last, e.end_s);
    if (e.stream == Stream::kCompute && e.device >= 0 && e.device < t.devices) s.busy_s[e.device] += e.end_s - e.start_s;
    if (e.stream == Stream::kSend) {
      auto link = std::find_if(s.links.begin(), s.links.end(),
                               [&](const LinkSummary& l) { return l.src == e.device && l.dst == e.peer; });
      if (link == s.links.end()) link = s.links.insert(s.links.end(), LinkSummary{e.device, e.peer, 0, 0});
      link->bytes += e.bytes;
      link->busy_s += e.end_s - e.start_s;
    }
  }
  s.step_time_s = t.events.empty() ? 0 : last - first;
  double busy = 0;
  for (double b : s.busy_s) busy += b;
  s.bubble_fraction = s.step_time_s > 0 ? 1 - busy / (t.devices * s.step_time_s) : 0;
  for (size_t d = 0; d < t.memory.size() && d < s.peak_memory_bytes.size(); ++d) {
    for (const auto& m : t.memory[d]) s.peak_memory_bytes[d] = std::max(s.peak_memory_bytes[d], m.bytes);
  }
  return s;
}

Result<Comparison> Compare(const Trace& predicted_trace, const Trace& m) {
  // A partial trace (torch.profiler's times the ops torch labels): the
  // prediction's same ops are compared with them.
  Trace subset;
  const bool partial = m.partial && m.events.size() < predicted_trace.events.size();
  if (partial) {
    std::set<Key> keys;
    for (const Event& e : m.events) keys.insert(KeyOf(e));
    subset = predicted_trace;
    std::erase_if(subset.events, [&](const Event& e) { return !keys.contains(KeyOf(e)); });
  }
  const Trace& p = partial ? subset : predicted_trace;
  auto differ = [](const std::string& what) {
    return Fail(fmt::format("the traces are of different schedules: {}", what));
  };
  if (p.stages != m.stages) return differ(fmt::format("{} stages predicted, {} measured", p.stages, m.stages));
  if (p.micro_batches != m.micro_batches) {
    return differ(fmt::format("{} micro-batches predicted, {} measured", p.micro_batches, m.micro_batches));
  }
  if (p.devices != m.devices) return differ(fmt::format("{} devices predicted, {} measured", p.devices, m.devices));
  if (p.placement != m.placement) return differ("the stages are placed on different devices");
  std::map<Key, const Event*> predicted;
  for (const Event& e : p.events) predicted[KeyOf(e)] = &e;
  if (p.events.size() != m.events.size()) {
    return differ(fmt::format("{} ops predicted, {} measured", p.events.size(), m.events.size()));
  }
  Comparison c;
  c.ops_predicted = static_cast<int>(predicted_trace.events.size());
  c.ops_compared = static_cast<int>(m.events.size());
  c.memory_measured = !m.memory.empty();
  const TraceSummary sp = Summarize(p), sm = Summarize(m);
  c.step_time_predicted_s = sp.step_time_s;
  c.step_time_measured_s = sm.step_time_s;
  c.step_time_error = Relative(sp.step_time_s, sm.step_time_s);
  c.bubble_fraction_predicted = sp.bubble_fraction;
  c.bubble_fraction_measured = sm.bubble_fraction;
  std::map<std::string, std::vector<double>> by_kind;
  std::map<std::string, int> zero_time;
  std::vector<OpError> all;
  for (const Event& e : m.events) {
    auto it = predicted.find(KeyOf(e));
    if (it == predicted.end()) {
      return differ(fmt::format("device {} measured {}, which the prediction does not have", e.device, Token(e)));
    }
    const double dp = it->second->end_s - it->second->start_s, dm = e.end_s - e.start_s;
    const std::string kind(ir::OpKindName(e.kind));
    if (dm <= 0 && dp > 0) {
      ++zero_time[kind];
      by_kind[kind];  // listed, with its count of timed ops
      continue;
    }
    const double err = Relative(dp, dm);
    by_kind[kind].push_back(std::abs(err));
    all.push_back(OpError{e.id, e.device, Token(e), dp, dm, err});
  }
  // The same ops in another order (GPipe against 1F1B of one config) are
  // another schedule too.
  if (const std::string where = FirstOrderDifference(p, m); !where.empty()) {
    return differ(fmt::format("the op order differs first at {}", where));
  }
  for (auto& [kind, errors] : by_kind) {
    std::sort(errors.begin(), errors.end());
    const size_t n = errors.size();
    const double median = n == 0 ? 0 : n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
    c.per_kind.push_back(
        KindError{kind, static_cast<int>(n), median, n == 0 ? 0 : errors.back(), zero_time[kind]});
  }
  for (int d = 0; d < p.devices; ++d) {
    c.devices.push_back(DeviceError{d, sp.busy_s[d], sm.busy_s[d], Relative(sp.busy_s[d], sm.busy_s[d]),
                                    sp.peak_memory_bytes[d], sm.peak_memory_bytes[d],
                                    c.memory_measured ? Relative(sp.peak_memory_bytes[d], sm.peak_memory_bytes[d])
                                                      : 0});
  }
  std::stable_sort(all.begin(), all.end(), [](const OpError& a, const OpError& b) {
    return std::abs(a.error) > std::abs(b.error);
  });
  all.resize(std::min<size_t>(all.size(), 10));
  c.worst = std::move(all);
  return c;
}

std::string ComparisonJson(const Comparison& c) {
  nlohmann::ordered_json j;
  if (c.ops_compared < c.ops_predicted) {
    j["ops_predicted"] = c.ops_predicted;
    j["ops_compared"] = c.ops_compared;
  }
  j["step_time_predicted_s"] = c.step_time_predicted_s;
  j["step_time_measured_s"] = c.step_time_measured_s;
  j["step_time_error"] = c.step_time_error;
  j["bubble_fraction_predicted"] = c.bubble_fraction_predicted;
  j["bubble_fraction_measured"] = c.bubble_fraction_measured;
  j["per_kind"] = nlohmann::ordered_json::array();
  for (const auto& k : c.per_kind) {
    j["per_kind"].push_back(
        {{"kind", k.kind}, {"count", k.count}, {"median_error", k.median_error}, {"worst_error", k.worst_error}});
    if (k.zero_time > 0) j["per_kind"].back()["zero_time"] = k.zero_time;
  }
  j["devices"] = nlohmann::ordered_json::array();
  for (const auto& d : c.devices) {
    j["devices"].push_back({{"device", d.device},
                            {"busy_predicted_s", d.busy_predicted_s},
                            {"busy_measured_s", d.busy_measured_s},
                            {"busy_error", d.busy_error},
                            {"peak_memory_predicted_bytes", d.peak_memory_predicted},
                            {"peak_memory_measured_bytes", c.memory_measured ? nlohmann::ordered_json(d.peak_memory_measured) : nullptr},
                            {"peak_memory_error", c.memory_measured ? nlohmann::ordered_json(d.peak_memory_error) : nullptr}});
  }
  j["worst"] = nlohmann::ordered_json::array();
  for (const auto& w : c.worst) {
    j["worst"].push_back({{"id", w.measured_id}, {"device", w.device}, {"op", w.op}, {"predicted_s", w.predicted_s},
                          {"measured_s", w.measured_s}, {"error", w.error}});
  }
  return j.dump(2) + "\n";
}

std::string ComparisonTable(const Comparison& c) {
  std::string out;
  auto it = std::back_inserter(out);
  if (c.ops_compared < c.ops_predicted) {
    fmt::format_to(it, "ops compared {} of the {} predicted: those the measured trace times\n", c.ops_compared,
                   c.ops_predicted);
  }
  fmt::format_to(it, "step time   predicted {:.6g} s   measured {:.6g} s   error {:+.1f}%\n", c.step_time_predicted_s,
                 c.step_time_measured_s, 100 * c.step_time_error);
  fmt::format_to(it, "bubble      predicted {:.3f}   measured {:.3f}   difference {:+.3f}\n", c.bubble_fraction_predicted,
                 c.bubble_fraction_measured, c.bubble_fraction_predicted - c.bubble_fraction_measured);
  fmt::format_to(it, "{:<10} {:>6} {:>14} {:>14}\n", "op kind", "ops", "median |err|", "worst |err|");
  for (const auto& k : c.per_kind) {
    fmt::format_to(it, "{:<10} {:>6} {:>13.1f}% {:>13.1f}%", k.kind, k.count, 100 * k.median_error,
                   100 * k.worst_error);
    if (k.zero_time > 0) fmt::format_to(it, "   and {} measured at no time (no relative error)", k.zero_time);
    out += "\n";
  }
  fmt::format_to(it, "{:>6} {:>12} {:>12} {:>8} {:>14} {:>14} {:>8}\n", "device", "busy pred", "busy meas", "err",
                 "peak mem pred", "peak mem meas", "err");
  for (const auto& d : c.devices) {
    if (!c.memory_measured) {
      fmt::format_to(it, "{:>6} {:>11.4g}s {:>11.4g}s {:>+7.1f}% {:>14.0f} {:>14} {:>8}\n", d.device, d.busy_predicted_s,
                     d.busy_measured_s, 100 * d.busy_error, d.peak_memory_predicted, "-", "-");
      continue;
    }
    fmt::format_to(it, "{:>6} {:>11.4g}s {:>11.4g}s {:>+7.1f}% {:>14.0f} {:>14.0f} {:>+7.1f}%\n", d.device, d.busy_predicted_s,
                   d.busy_measured_s, 100 * d.busy_error, d.peak_memory_predicted, d.peak_memory_measured,
                   100 * d.peak_memory_error);
  }
  fmt::format_to(it, "largest op errors:");
  for (const auto& w : c.worst) fmt::format_to(it, " d{}:{} {:+.0f}%", w.device, w.op, 100 * w.error);
  out += "\n";
  return out;
}

}  // namespace twinpipe::traces
