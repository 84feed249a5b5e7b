#include "traces/trace.h"

#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ir/json_reader.h"

namespace twinpipe::traces {

std::string_view StreamName(Stream s) {
  switch (s) {
    case Stream::kCompute: return "compute";
    case Stream::kSend: return "send";
    case Stream::kRecv: return "recv";
    case Stream::kAllReduce: return "allreduce";
  }
  return "compute";
}

namespace {

std::optional<Stream> StreamFromName(std::string_view n) {
  for (Stream s : {Stream::kCompute, Stream::kSend, Stream::kRecv, Stream::kAllReduce}) {
    if (StreamName(s) == n) return s;
  }
  return std::nullopt;
}

// The first and last GPU of a device's tensor-parallel group (replica 0).
std::pair<int32_t, int32_t> GpusOf(const Trace& t, int32_t device) {
  return {t.tensor_parallel * device, t.tensor_parallel * (device + 1) - 1};
}

}  // namespace

std::string WriteTraceJson(const Trace& t) {
  std::string out;
  out.reserve(t.events.size() * 160 + 256);
  auto it = std::back_inserter(out);
  fmt::format_to(it,
                 "{{\n  \"format\": \"twinpipe-trace\",\n  \"version\": 1,\n  \"source\": \"{}\",\n"
                 "  \"stages\": {},\n  \"microbatches\": {},\n  \"devices\": {},\n  \"replicas\": {},\n{}{}"
                 "  \"placement\": [{}],\n  \"events\": [",
                 t.source, t.stages, t.micro_batches, t.devices, t.replicas,
                 t.tensor_parallel > 1 ? fmt::format("  \"tensor_parallel\": {},\n", t.tensor_parallel) : "",
                 t.partial ? "  \"partial\": true,\n" : "", fmt::join(t.placement, ", "));
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    fmt::format_to(it,
                   "{}\n    {{\"id\": {}, \"device\": {}, \"stream\": \"{}\", \"kind\": \"{}\", \"stage\": {}, "
                   "\"microbatch\": {}, \"peer\": {}, \"start_s\": {}, \"end_s\": {}, \"bytes\": {}}}",
                   i ? "," : "", e.id, e.device, StreamName(e.stream), ir::OpKindName(e.kind), e.stage,
                   e.micro_batch, e.peer, e.start_s, e.end_s, e.bytes);
  }
  out += t.events.empty() ? "],\n  \"memory\": [" : "\n  ],\n  \"memory\": [";
  for (size_t d = 0; d < t.memory.size(); ++d) {
    fmt::format_to(it, "{}\n    {{\"device\": {}, \"samples\": [", d ? "," : "", d);
    for (size_t i = 0; i < t.memory[d].size(); ++i) {
      fmt::format_to(it, "{}[{}, {}]", i ? ", " : "", t.memory[d][i].time_s, t.memory[d][i].bytes);
    }
    out += "]}";
  }
  out += t.memory.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

Result<Trace> ReadTraceJson(std::string_view text, std::string_view source) {
  using ir::json::Json;
  return ir::json::TryRead([&] {
    const ir::json::Reader r{std::string(source)};
    const Json doc = r.Parse(text);
    r.Format(doc, "twinpipe-trace");
    if (doc.contains("version") && doc["version"] != 1) {
      r.Fail("/version", fmt::format("this twinpipe reads trace version 1, got {}", doc["version"].dump()));
    }
    r.Int(doc, "version", "", 1, 1);
    r.Keys(doc, "", {"format", "version", "source", "stages", "microbatches", "devices", "replicas", "tensor_parallel",
                     "partial", "placement", "events", "memory"});
    constexpr int64_t kMostCount = std::numeric_limits<int32_t>::max();
    Trace t;
    t.source = r.String(doc, "source", "", {}, std::nullopt);
    t.stages = static_cast<int32_t>(r.Int(doc, "stages", "", 1, kMostCount));
    t.micro_batches = static_cast<int32_t>(r.Int(doc, "microbatches", "", 1, kMostCount));
    t.devices = static_cast<int32_t>(r.Int(doc, "devices", "", 1, kMostCount));
    t.replicas = static_cast<int32_t>(r.Int(doc, "replicas", "", 1, kMostCount));
    t.tensor_parallel = static_cast<int32_t>(r.Int(doc, "tensor_parallel", "", 1, kMostCount, 1));
    t.partial = r.Bool(doc, "partial", "", false);
    const Json& placement = r.Array(doc, "placement", "");
    if (static_cast<int64_t>(placement.size()) != t.stages) {
      r.Fail("/placement", fmt::format("expected one device per stage ({}), got {}", t.stages, placement.size()));
    }
    for (size_t i = 0; i < placement.size(); ++i) {
      t.placement.push_back(static_cast<int32_t>(r.IntAt(placement, i, "/placement", 0, t.devices - 1)));
    }
    const Json& events = r.Array(doc, "events", "");
    for (size_t i = 0; i < events.size(); ++i) {
      const std::string path = fmt::format("/events/{}", i);
      const Json& e = events[i];
      if (!e.is_object()) r.Fail(path, fmt::format("expected an object, got {}", e.type_name()));
      r.Keys(e, path, {"id", "device", "stream", "kind", "stage", "microbatch", "peer", "start_s", "end_s", "bytes"});
      Event ev;
      ev.id = static_cast<int32_t>(r.Int(e, "id", path, 0, kMostCount));
      ev.device = static_cast<int32_t>(r.Int(e, "device", path, 0, t.devices - 1));
      const std::string stream = r.String(e, "stream", path, {"compute", "send", "recv", "allreduce"}, std::nullopt);
      ev.stream = *StreamFromName(stream);
      if (!e.contains("kind")) r.Fail(path, "missing key 'kind' (an op kind such as F, B or SEND_F)");
      const std::string kind = r.String(e, "kind", path, {}, std::nullopt);
      const auto op_kind = ir::OpKindFromName(kind);
      if (!op_kind) r.Fail(path + "/kind", fmt::format("expected an op kind such as F, B or SEND_F, got '{}'", kind));
      ev.kind = *op_kind;
      ev.stage = static_cast<int32_t>(r.Int(e, "stage", path, -1, t.stages - 1));
      ev.micro_batch = static_cast<int32_t>(r.Int(e, "microbatch", path, -1, t.micro_batches - 1));
      ev.peer = static_cast<int32_t>(r.Int(e, "peer", path, -1, t.devices - 1));
      constexpr double kMostSeconds = 1e9;
      ev.start_s = r.Number(e, "start_s", path, -kMostSeconds, kMostSeconds);
      ev.end_s = r.Number(e, "end_s", path, -kMostSeconds, kMostSeconds);
      ev.bytes = r.Int(e, "bytes", path, 0, std::numeric_limits<int64_t>::max());
      if (!(ev.end_s >= ev.start_s)) r.Fail(path + "/end_s", "ends before it starts");
      t.events.push_back(ev);
    }
    const Json& memory = r.Array(doc, "memory", "", false);
    t.memory.assign(memory.size(), {});
    for (size_t d = 0; d < memory.size(); ++d) {
      const std::string path = fmt::format("/memory/{}", d);
      if (!memory[d].is_object()) r.Fail(path, fmt::format("expected an object, got {}", memory[d].type_name()));
      r.Keys(memory[d], path, {"device", "samples"});
      // Listed in device order (as written): entry d is device d's.
      if (memory[d].contains("device") && !(memory[d]["device"].is_number_integer() &&
                                            memory[d]["device"].get<int64_t>() == static_cast<int64_t>(d))) {
        r.Fail(path + "/device", fmt::format("expected {}: the memory entries list the devices in order, got {}", d,
                                             memory[d]["device"].dump()));
      }
      if (static_cast<int64_t>(d) >= int64_t{t.devices} * t.replicas) {
        r.Fail(path, fmt::format("a memory entry for device {} of a trace of {} devices x {} replicas", d, t.devices,
                                 t.replicas));
      }
      const Json& samples = r.Array(memory[d], "samples", path);
      for (size_t i = 0; i < samples.size(); ++i) {
        const std::string sample = fmt::format("{}/samples/{}", path, i);
        if (!samples[i].is_array() || samples[i].size() != 2) r.Fail(sample, "expected [time_s, bytes]");
        t.memory[d].push_back(MemorySample{r.NumberAt(samples[i], 0, sample, -1e9, 1e9),
                                           r.NumberAt(samples[i], 1, sample, -1e30, 1e30)});
      }
    }
    return t;
  });
}

std::string WriteChromeTrace(const Trace& t) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  auto it = std::back_inserter(out);
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (int32_t d = 0; d < t.devices; ++d) {
    sep();
    const auto [first_gpu, last_gpu] = GpusOf(t, d);
    fmt::format_to(it, R"({{"ph": "M", "name": "process_name", "pid": {}, "tid": 0, "args": {{"name": "device {}{}"}}}})", d, d,
                   t.tensor_parallel > 1 ? fmt::format(" (GPUs {}..{})", first_gpu, last_gpu) : "");
    for (Stream s : {Stream::kCompute, Stream::kSend, Stream::kRecv, Stream::kAllReduce}) {
      sep();
      fmt::format_to(it, R"({{"ph": "M", "name": "thread_name", "pid": {}, "tid": {}, "args": {{"name": "{}"}}}})", d,
                     static_cast<int>(s), StreamName(s));
    }
  }
  auto label = [](const Event& e) {
    return ir::OpToken(ir::Op{.kind = e.kind, .stage = e.stage, .micro_batch = e.micro_batch});
  };
  for (const Event& e : t.events) {
    sep();
    fmt::format_to(it,
                   R"({{"ph": "X", "name": "{}", "cat": "{}", "pid": {}, "tid": {}, "ts": {}, "dur": {}, )"
                   R"("args": {{"id": {}, "stage": {}, "microbatch": {}, "bytes": {}}}}})",
                   label(e), ir::OpKindName(e.kind), e.device, static_cast<int>(e.stream), e.start_s * 1e6,
                   (e.end_s - e.start_s) * 1e6, e.id, e.stage, e.micro_batch, e.bytes);
    // Flow arrows: a send starts one, its receive (same transfer) ends it.
    if (e.kind == ir::OpKind::kSendF || e.kind == ir::OpKind::kSendB) {
      const bool fwd = e.kind == ir::OpKind::kSendF;
      sep();
      fmt::format_to(it, R"({{"ph": "s", "name": "transfer", "cat": "transfer", "id": "{}{}-{}", "pid": {}, "tid": {}, "ts": {}}})",
                     fwd ? "f" : "b", e.stage, e.micro_batch, e.device, static_cast<int>(e.stream), e.start_s * 1e6);
    } else if (e.kind == ir::OpKind::kRecvF || e.kind == ir::OpKind::kRecvB) {
      const bool fwd = e.kind == ir::OpKind::kRecvF;
      sep();
      fmt::format_to(it,
                     R"({{"ph": "f", "bp": "e", "name": "transfer", "cat": "transfer", "id": "{}{}-{}", "pid": {}, "tid": {}, "ts": {}}})",
                     fwd ? "f" : "b", fwd ? e.stage - 1 : e.stage + 1, e.micro_batch, e.device,
                     static_cast<int>(e.stream), e.end_s * 1e6);
    }
  }
  for (size_t d = 0; d < t.memory.size(); ++d) {
    for (const auto& s : t.memory[d]) {
      sep();
      fmt::format_to(it, R"({{"ph": "C", "name": "memory", "pid": {}, "ts": {}, "args": {{"bytes": {}}}}})", d,
                     s.time_s * 1e6, s.bytes);
    }
  }
  out += "\n]}\n";
  return out;
}

}  // namespace twinpipe::traces
