#include "traces/torch_profile.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ir/torch_csv.h"
#include "traces/schedule_trace.h"

namespace twinpipe::traces {

namespace {

using Json = nlohmann::json;

// (kind, stage, micro-batch): an op within its device's program.
using Key = std::tuple<ir::OpKind, int32_t, int32_t>;

struct Labelled {
  Key key;
  double cpu_start_us = 0, cpu_dur_us = 0;  // the label's range on the host
  size_t index = 0;                          // in traceEvents
  double start_us = 0, dur_us = 0;           // the op's time: the GPU's where it launched work there
};

// "Forward 3" / "Backward 3": the single-stage schedules' labels.
std::optional<std::pair<ir::OpKind, int32_t>> SingleStageLabel(std::string_view name) {
  for (auto [prefix, kind] : {std::pair{std::string_view("Forward "), ir::OpKind::kForward},
                              std::pair{std::string_view("Backward "), ir::OpKind::kBackward}}) {
    if (name.substr(0, prefix.size()) != prefix) continue;
    const std::string_view digits = name.substr(prefix.size());
    int32_t mb = -1;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), mb);
    if (ec == std::errc() && p == digits.data() + digits.size() && mb >= 0) return std::pair{kind, mb};
  }
  return std::nullopt;
}

// A member that is a string, or "" (absent, or of another type).
std::string StringField(const Json& e, const char* key) {
  auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// The longest time a twinpipe trace holds (traces/trace.cc: 1e9 s).
constexpr double kMostTraceMicroseconds = 1e15;

// A number field of a trace event, or a message naming its JSON path.
Result<double> Microseconds(const Json& e, const char* field, const std::string& name, size_t i) {
  auto it = e.find(field);
  // Timestamps may be absolute (Kineto before 2024: Unix-epoch
  // microseconds); a duration is at most 1e15 us, the 1e9 s a twinpipe
  // trace holds (the op's end after the step's start is held to it below).
  const bool duration = std::string_view(field) == "dur";
  if (it == e.end() || !it->is_number() || !std::isfinite(it->get<double>()) ||
      (duration && !(it->get<double>() >= 0 && it->get<double>() <= kMostTraceMicroseconds))) {
    return Fail(fmt::format("{}: /traceEvents/{}/{}: expected a number of microseconds{}", name, i, field,
                            duration ? " from 0 to 1e15" : ""));
  }
  return it->get<double>();
}

// Where the profile recorded the GPU's work (events of category kernel,
// gpu_memcpy, gpu_memset, each tied by args.correlation to the runtime or
// driver call that launched it), an op's time is that of the work launched
// while its label was open on the host, from any of the process's threads:
// the backward's kernels come from autograd's device thread, outside the
// label's own thread, so torch's gpu_user_annotation ranges (kernels of the
// labelling thread only) miss them. Labels are torch's, one after another on
// the host: a launch belongs to the latest label started before it, if that
// one is still open. Returns -1 where no label launched GPU work (the host's
// times stand), else the number of labels that launched none.
Result<int> GpuSpans(const Json& events, const std::string& name, std::vector<Labelled>& labels) {
  std::map<int64_t, double> launched;  // correlation -> the launch's host time
  std::vector<std::tuple<int64_t, double, double>> work;  // correlation, start, duration
  for (size_t i = 0; i < events.size(); ++i) {
    const Json& e = events[i];
    if (!e.is_object() || StringField(e, "ph") != "X") continue;
    const std::string cat = StringField(e, "cat");
    const bool is_launch = cat == "cuda_runtime" || cat == "cuda_driver";
    const bool is_work = cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
    if (!is_launch && !is_work) continue;
    auto args = e.find("args");
    if (args == e.end() || !args->is_object() || !args->contains("correlation") ||
        !(*args)["correlation"].is_number_integer()) {
      continue;  // tied to no launch: nobody's op
    }
    const int64_t correlation = (*args)["correlation"];
    auto ts = Microseconds(e, "ts", name, i);
    if (!ts) return tl::unexpected(ts.error());
    if (is_launch) {
      launched.emplace(correlation, *ts);
      continue;
    }
    auto dur = Microseconds(e, "dur", name, i);
    if (!dur) return tl::unexpected(dur.error());
    work.emplace_back(correlation, *ts, *dur);
  }
  if (work.empty() || labels.empty()) return -1;
  std::vector<size_t> order(labels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return labels[a].cpu_start_us < labels[b].cpu_start_us; });
  std::vector<double> lo(labels.size(), kInfinity), hi(labels.size(), -kInfinity);
  for (const auto& [correlation, start, dur] : work) {
    auto it = launched.find(correlation);
    if (it == launched.end()) continue;
    const double at = it->second;
    auto after = std::upper_bound(order.begin(), order.end(), at,
                                  [&](double t, size_t l) { return t < labels[l].cpu_start_us; });
    if (after == order.begin()) continue;
    const size_t l = *std::prev(after);
    if (at > labels[l].cpu_start_us + labels[l].cpu_dur_us) continue;  // between ops: the optimizer, a sync
    lo[l] = std::min(lo[l], start);
    hi[l] = std::max(hi[l], start + dur);
  }
  // Work that no label launched leaves the host's times standing.
  bool any = false;
  for (size_t l = 0; l < labels.size(); ++l) any = any || lo[l] <= hi[l];
  if (!any) return -1;
  // An op that launched nothing took no GPU time: it ends where the op
  // before it did on the GPU (its host range where none did before it).
  int host = 0;
  double previous_end = -kInfinity;
  for (size_t l : order) {
    if (hi[l] < lo[l]) {
      ++host;
      if (std::isfinite(previous_end)) {
        labels[l].start_us = previous_end;
        labels[l].dur_us = 0;
      }
      continue;
    }
    labels[l].start_us = lo[l];
    labels[l].dur_us = hi[l] - lo[l];
    previous_end = hi[l];
  }
  return host;
}

}  // namespace

Result<std::string> Gunzipped(std::string bytes, const std::string& name) {
  if (bytes.size() < 2 || static_cast<unsigned char>(bytes[0]) != 0x1f || static_cast<unsigned char>(bytes[1]) != 0x8b) {
    return bytes;
  }
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return Fail(fmt::format("{}: zlib would not start", name));
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(bytes.data());
  z.avail_in = static_cast<uInt>(bytes.size());
  int rc = Z_OK;
  char buffer[1 << 16];
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - z.avail_out);
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // input ended early
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) return Fail(fmt::format("{}: not a whole gzip stream (zlib: {})", name, rc));
  return out;
}

Result<TorchProfileImport> ImportTorchProfiles(const std::vector<std::pair<std::string, std::string>>& files,
                                               const ir::Schedule& schedule) {
  const int32_t D = schedule.num_devices;
  if (static_cast<int32_t>(files.size()) != D) {
    return Fail(fmt::format("{} profiles for a schedule of {} devices: give one per rank", files.size(), D));
  }
  // Per device, the ops its program holds, by key.
  std::vector<std::map<Key, int32_t>> ops(D);
  std::vector<int32_t> stage_of(D, -1);  // a device's only stage, or -1 (several, or none)
  {
    int32_t id = 0;
    for (int32_t d = 0; d < D; ++d) {
      std::vector<int32_t> stages;
      for (const ir::Op& op : schedule.programs[d]) {
        ops[d][Key{op.kind, op.stage, op.micro_batch}] = id++;
        if (!ir::IsComm(op.kind) && op.stage >= 0 &&
            std::find(stages.begin(), stages.end(), op.stage) == stages.end()) {
          stages.push_back(op.stage);
        }
      }
      if (stages.size() == 1) stage_of[d] = stages.front();
    }
  }
  TorchProfileImport result;
  std::vector<std::vector<Labelled>> labelled(D);
  // How a message names a rank: from the profile's /distributedInfo/rank, or
  // without one, from its place in the list, which the message then says.
  std::vector<std::string> who(D);
  std::vector<std::string> file_of(D);
  double t0 = std::numeric_limits<double>::infinity();
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string& name = files[f].first;
    auto text = Gunzipped(files[f].second, name);
    if (!text) return tl::unexpected(text.error());
    Json doc;
    try {
      doc = Json::parse(*text);
    } catch (const Json::exception& e) {  // a syntax error, or a number out of range
      return Fail(fmt::format("{}: not JSON ({})", name, e.what()));
    }
    if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
      return Fail(fmt::format("{}: /traceEvents: expected torch.profiler's Chrome trace (an object with an array "
                              "traceEvents, as export_chrome_trace writes)", name));
    }
    int32_t rank = static_cast<int32_t>(f);
    const bool said = doc.contains("distributedInfo") && doc["distributedInfo"].contains("rank");
    if (said) {
      const Json& r = doc["distributedInfo"]["rank"];
      if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() >= D) {
        return Fail(fmt::format("{}: /distributedInfo/rank: expected a rank from 0 to {}, got {}", name, D - 1,
                                r.dump()));
      }
      rank = r.get<int32_t>();
    }
    const std::string named =
        said ? fmt::format("rank {}", rank)
             : fmt::format("rank {} (by its place among the profiles: it has no /distributedInfo/rank)", rank);
    if (!file_of[rank].empty()) {
      return Fail(fmt::format("{}: {} again (also {}): give one profile per rank", name, named, file_of[rank]));
    }
    who[rank] = named;
    file_of[rank] = name;
    const Json& events = doc["traceEvents"];
    std::map<Key, size_t> seen;
    for (size_t i = 0; i < events.size(); ++i) {
      const Json& e = events[i];
      if (!e.is_object() || StringField(e, "cat") != "user_annotation" || StringField(e, "ph") != "X") continue;
      const std::string path = fmt::format("/traceEvents/{}", i);
      if (!e.contains("name") || !e["name"].is_string()) {
        return Fail(fmt::format("{}: {}/name: expected the label, a string", name, path));
      }
      const std::string label = e["name"];
      Key key;
      if (label.rfind("PP:", 0) == 0) {
        auto action = ir::ParseTorchAction(std::string_view(label).substr(3), ir::TorchDialect::kCurrent);
        if (!action) return Fail(fmt::format("{}: {}/name: {}", name, path, action.error().message));
        if (!action->kind) {
          ++result.bookkeeping;
          continue;
        }
        key = Key{*action->kind, action->stage, action->micro_batch};
      } else if (auto single = SingleStageLabel(label)) {
        if (stage_of[rank] < 0) {
          return Fail(fmt::format("{}: {}/name: '{}' is a single-stage schedule's label, but device {} runs "
                                  "several stages (or none) in the schedule", name, path, label, rank));
        }
        key = Key{single->first, stage_of[rank], single->second};
      } else {
        continue;  // the user's own annotations, gloo/NCCL calls, ProfilerStep#
      }
      auto ts = Microseconds(e, "ts", name, i);
      if (!ts) return tl::unexpected(ts.error());
      auto dur = Microseconds(e, "dur", name, i);
      if (!dur) return tl::unexpected(dur.error());
      const ir::Op probe{.kind = std::get<0>(key), .stage = std::get<1>(key), .micro_batch = std::get<2>(key)};
      if (!ops[rank].contains(key)) {
        return Fail(fmt::format("{}: {}/name: '{}' ({}) is no op of the schedule's program for {}", name, path,
                                label, ir::OpToken(probe), who[rank]));
      }
      if (auto [it, fresh] = seen.emplace(key, i); !fresh) {
        return Fail(fmt::format("{}: {}/name: '{}' again (first at /traceEvents/{}): the profile holds more than "
                                "one step; profile one", name, path, label, it->second));
      }
      labelled[rank].push_back(Labelled{key, *ts, *dur, i, *ts, *dur});
    }
    if (labelled[rank].empty() && !ops[rank].empty()) {
      return Fail(fmt::format("{}: no op of the schedule's program for {} is labelled (torch.distributed.pipelining labels its "
                              "actions 'PP:<action>' or 'Forward <i>' / 'Backward <i>' in user_annotation events)",
                              name, who[rank]));
    }
    auto gpu = GpuSpans(events, name, labelled[rank]);
    if (!gpu) return tl::unexpected(gpu.error());
    result.gpu_time = result.gpu_time || *gpu >= 0;
    result.no_gpu_work += std::max(*gpu, 0);
    for (const Labelled& l : labelled[rank]) t0 = std::min(t0, l.start_us);
  }
  // A rank runs its program's actions one after another: a profile whose
  // labels start in another order is of another schedule.
  for (int32_t d = 0; d < D; ++d) {
    auto& list = labelled[d];
    std::stable_sort(list.begin(), list.end(),
                     [](const Labelled& a, const Labelled& b) { return a.cpu_start_us < b.cpu_start_us; });
    for (size_t i = 1; i < list.size(); ++i) {
      if (ops[d].at(list[i].key) > ops[d].at(list[i - 1].key)) continue;
      auto token = [](const Key& k) {
        return ir::OpToken(ir::Op{.kind = std::get<0>(k), .stage = std::get<1>(k), .micro_batch = std::get<2>(k)});
      };
      return Fail(fmt::format("{}: {} ran {} (/traceEvents/{}) before {} (/traceEvents/{}), which the schedule's "
                              "device {} runs first: the profile is of another schedule",
                              file_of[d], who[d], token(list[i - 1].key), list[i - 1].index, token(list[i].key),
                              list[i].index, d));
    }
  }
  Trace all = TraceFor(schedule, "torch.profiler");
  std::vector<char> measured(all.events.size(), 0);
  for (int32_t d = 0; d < D; ++d) {
    for (const Labelled& l : labelled[d]) {
      if (l.start_us + l.dur_us - t0 > kMostTraceMicroseconds) {
        return Fail(fmt::format("{}: /traceEvents/{}: ends {:.4g} s after the profile's first op starts, beyond the "
                                "1e9 s a trace holds", file_of[d], l.index, (l.start_us + l.dur_us - t0) * 1e-6));
      }
      Event& e = all.events[ops[d].at(l.key)];
      e.start_s = (l.start_us - t0) * 1e-6;
      e.end_s = (l.start_us + l.dur_us - t0) * 1e-6;
      measured[e.id] = 1;
    }
  }
  for (size_t i = 0; i < all.events.size(); ++i) {
    // torch labels every compute action: one without its label is a profile
    // that does not cover the step, read as partial it would hide that.
    const Event& e = all.events[i];
    if (!measured[i] && (e.kind == ir::OpKind::kForward || e.kind == ir::OpKind::kBackward ||
                         e.kind == ir::OpKind::kBackwardInput || e.kind == ir::OpKind::kBackwardWeight)) {
      const std::string token =
          ir::OpToken(ir::Op{.kind = e.kind, .stage = e.stage, .micro_batch = e.micro_batch});
      return Fail(fmt::format("{}: {} has no event labelled for its {} (torch labels every compute action, "
                              "'PP:{}' or 'Forward <i>' / 'Backward <i>'): the profile does not cover the whole step "
                              "of this schedule", file_of[e.device].empty() ? files.front().first : file_of[e.device],
                              who[e.device].empty() ? fmt::format("rank {}", e.device) : who[e.device], token, token));
    }
    if (measured[i]) {
      result.trace.events.push_back(all.events[i]);
      ++result.measured;
    } else {
      ++result.unmeasured;
    }
  }
  if (result.measured == 0) {
    return Fail(fmt::format("{}: no op of the schedule is labelled (torch.distributed.pipelining labels its actions "
                            "'PP:<action>' or 'Forward <i>' / 'Backward <i>' in user_annotation events)",
                            files.front().first));
  }
  all.events.clear();
  result.trace = Trace{std::move(all.source), all.stages, all.micro_batches, all.devices, all.replicas,
                       all.tensor_parallel, std::move(all.placement), std::move(result.trace.events), {}};
  result.trace.partial = result.unmeasured > 0;
  return result;
}

}  // namespace twinpipe::traces
