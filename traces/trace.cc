#include "traces/trace.h"

#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
                 "  \"stages\": {},\n  \"microbatches\": {},\n  \"devices\": {},\n  \"replicas\": {},\n{}"
                 "  \"placement\": [{}],\n  \"events\": [",
                 t.source, t.stages, t.micro_batches, t.devices, t.replicas,
                 t.tensor_parallel > 1 ? fmt::format("  \"tensor_parallel\": {},\n", t.tensor_parallel) : "",
                 fmt::join(t.placement, ", "));
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

namespace {

// `key` of `j` as an integer that fits T; anything else (a fraction, a
// number out of range, another type) throws, and the caller names the path.
template <typename T>
T IntegerAt(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  const bool fits = v.is_number_integer() &&
                    (v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                                            : v.get<int64_t>() >= std::numeric_limits<T>::min() &&
                                                  v.get<int64_t>() <= std::numeric_limits<T>::max());
  if (!fits) throw std::invalid_argument(fmt::format("{}: expected an integer in range, got {}", key, v.dump()));
  return static_cast<T>(v.get<int64_t>());
}

}  // namespace

Result<Trace> ReadTraceJson(std::string_view text, std::string_view source) {
  using nlohmann::json;
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    return Fail(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  auto bad = [&](const std::string& path, const std::string& what) {
    return Fail(fmt::format("{}: {}: {}", source, path, what));
  };
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != "twinpipe-trace") {
    return bad("/format", "expected \"twinpipe-trace\"");
  }
  Trace t;
  try {
    t.source = doc.at("source").get<std::string>();
    t.stages = IntegerAt<int32_t>(doc, "stages");
    t.micro_batches = IntegerAt<int32_t>(doc, "microbatches");
    t.devices = IntegerAt<int32_t>(doc, "devices");
    t.replicas = IntegerAt<int32_t>(doc, "replicas");
    if (doc.contains("tensor_parallel")) t.tensor_parallel = IntegerAt<int32_t>(doc, "tensor_parallel");
    const json& placement = doc.at("placement");
    if (!placement.is_array()) throw std::invalid_argument("placement: expected an array of devices");
    for (size_t i = 0; i < placement.size(); ++i) {
      const json entry = {{"placement", placement[i]}};
      t.placement.push_back(IntegerAt<int32_t>(entry, "placement"));
      if (t.placement.back() < 0 || t.placement.back() >= std::max(t.devices, 1)) {
        throw std::invalid_argument(fmt::format("placement/{}: device {} out of range", i, t.placement.back()));
      }
    }
  } catch (const std::exception& e) {
    return bad("/", fmt::format("header: {}", e.what()));
  }
  if (t.devices < 1 || t.stages < 1 || t.micro_batches < 1 || static_cast<int32_t>(t.placement.size()) != t.stages) {
    return bad("/", "expected stages, microbatches and devices >= 1 and one placement entry per stage");
  }
  if (t.tensor_parallel < 1) return bad("/tensor_parallel", "expected an integer >= 1 (GPUs per device)");
  const json& events = doc.contains("events") ? doc["events"] : json();
  if (!events.is_array()) return bad("/events", "expected an array of events");
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    const std::string path = fmt::format("/events/{}", i);
    Event ev;
    try {
      ev.id = IntegerAt<int32_t>(e, "id");
      ev.device = IntegerAt<int32_t>(e, "device");
      auto stream = StreamFromName(e.at("stream").get<std::string>());
      if (!stream) return bad(path + "/stream", "expected compute, send, recv or allreduce");
      ev.stream = *stream;
      auto kind = ir::OpKindFromName(e.at("kind").get<std::string>());
      if (!kind) return bad(path + "/kind", "expected an op kind such as F, B or SEND_F");
      ev.kind = *kind;
      ev.stage = IntegerAt<int32_t>(e, "stage");
      ev.micro_batch = IntegerAt<int32_t>(e, "microbatch");
      ev.peer = IntegerAt<int32_t>(e, "peer");
      ev.start_s = e.at("start_s").get<double>();
      ev.end_s = e.at("end_s").get<double>();
      ev.bytes = IntegerAt<int64_t>(e, "bytes");
    } catch (const std::exception& ex) {
      return bad(path, ex.what());
    }
    if (ev.device < 0 || ev.device >= t.devices) return bad(path + "/device", "out of range");
    if (!(ev.end_s >= ev.start_s)) return bad(path + "/end_s", "ends before it starts");
    t.events.push_back(ev);
  }
  const json& memory = doc.contains("memory") ? doc["memory"] : json::array();
  if (!memory.is_array()) return bad("/memory", "expected an array");
  t.memory.assign(memory.size(), {});
  for (size_t d = 0; d < memory.size(); ++d) {
    try {
      for (const auto& s : memory[d].at("samples")) {
        t.memory[d].push_back(MemorySample{s.at(0).get<double>(), s.at(1).get<double>()});
      }
    } catch (const json::exception& ex) {
      return bad(fmt::format("/memory/{}", d), ex.what());
    }
  }
  return t;
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
