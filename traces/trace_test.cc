#include "traces/trace.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

namespace twinpipe::traces {
namespace {

Trace Small() {
  Trace t;
  t.source = "simulate";
  t.stages = 2;
  t.micro_batches = 1;
  t.devices = 2;
  t.placement = {0, 1};
  using ir::OpKind;
  t.events = {
      {0, 0, Stream::kCompute, OpKind::kForward, 0, 0, -1, 0.0, 1e-3, 0},
      {1, 0, Stream::kSend, OpKind::kSendF, 0, 0, 1, 1e-3, 1.5e-3, 4096},
      {2, 1, Stream::kRecv, OpKind::kRecvF, 1, 0, 0, 1e-3, 1.5e-3, 4096},
      {3, 1, Stream::kCompute, OpKind::kForward, 1, 0, -1, 1.5e-3, 2.5e-3, 0},
  };
  t.memory = {{{0, 100}, {1e-3, 200}}, {{0, 50}}};
  return t;
}

TEST(Trace, JsonRoundTrip) {
  const Trace t = Small();
  const std::string text = WriteTraceJson(t);
  auto back = ReadTraceJson(text, "t.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, t);
  EXPECT_EQ(WriteTraceJson(*back), text);
}

TEST(Trace, ChromeTraceHasProcessesThreadsFlowsAndCounters) {
  const auto j = nlohmann::json::parse(WriteChromeTrace(Small()));
  std::map<std::string, int> phases;
  std::map<std::string, std::string> flow_start, flow_end;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    ++phases[ph];
    if (ph == "s") flow_start[e["id"]] = std::to_string(e["pid"].get<int>());
    if (ph == "f") flow_end[e["id"]] = std::to_string(e["pid"].get<int>());
    if (ph == "X") {
      EXPECT_GE(e["dur"].get<double>(), 0);
      EXPECT_TRUE(e.contains("ts"));
    }
  }
  EXPECT_EQ(phases["X"], 4);
  EXPECT_EQ(phases["M"], 2 + 2 * 4);  // a process per device, a thread per stream
  EXPECT_EQ(phases["C"], 3);
  ASSERT_EQ(flow_start.size(), 1u);
  EXPECT_EQ(flow_start.begin()->first, flow_end.begin()->first);  // the arrow joins send and receive
  EXPECT_EQ(flow_start.begin()->second, "0");
  EXPECT_EQ(flow_end.begin()->second, "1");
}

// A device that is a tensor-parallel group says which GPUs form it, in the
// trace (read back as written) and in Chrome's process names.
TEST(Trace, TensorParallelGroupsNameTheirGpus) {
  Trace t = Small();
  t.tensor_parallel = 8;
  const std::string text = WriteTraceJson(t);
  EXPECT_NE(text.find("\"tensor_parallel\": 8"), std::string::npos);
  auto back = ReadTraceJson(text, "t.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, t);
  EXPECT_EQ(WriteTraceJson(Small()).find("tensor_parallel"), std::string::npos);  // t = 1: as before
  std::vector<std::string> names;
  const auto chrome = nlohmann::json::parse(WriteChromeTrace(t));
  for (const auto& e : chrome["traceEvents"]) {
    if (e["name"] == "process_name") names.push_back(e["args"]["name"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"device 0 (GPUs 0..7)", "device 1 (GPUs 8..15)"}));
  std::string bad = text;
  bad.replace(bad.find("\"tensor_parallel\": 8"), 20, "\"tensor_parallel\": 0");
  EXPECT_EQ(ReadTraceJson(bad, "t.json").error().message,
            "t.json: /tensor_parallel: expected an integer from 1 to 2147483647, got 0");
}

TEST(Trace, BadTracesNameThePath) {
  EXPECT_EQ(ReadTraceJson("{\"format\": \"x\"}", "t.json").error().message, "t.json: /format: expected \"twinpipe-trace\"");
  std::string text = WriteTraceJson(Small());
  text.replace(text.find("\"stream\": \"send\""), 16, "\"stream\": \"disk\"");
  EXPECT_EQ(ReadTraceJson(text, "t.json").error().message,
            "t.json: /events/1/stream: 'disk' is not one of compute, send, recv, allreduce");
  // Type errors, missing keys and out-of-range values name their path.
  auto message = [](std::string trace, const std::string& from, const std::string& to) {
    trace.replace(trace.find(from), from.size(), to);
    return ReadTraceJson(trace, "t.json").error().message;
  };
  const std::string small = WriteTraceJson(Small());
  EXPECT_EQ(message(small, "\"source\": \"simulate\"", "\"source\": 3"),
            "t.json: /source: expected a string, got 3");
  EXPECT_EQ(message(small, "\"stages\": 2,", ""), "t.json: /: missing key 'stages' (an integer from 1 to 2147483647)");
  EXPECT_EQ(message(small, "\"placement\": [0, 1]", "\"placement\": [0, \"1\"]"),
            "t.json: /placement/1: expected an integer, got \"1\"");
  EXPECT_EQ(message(small, "\"placement\": [0, 1]", "\"placement\": [0, 5]"),
            "t.json: /placement/1: expected an integer from 0 to 1, got 5");
  EXPECT_EQ(message(small, "\"start_s\": 0,", "\"start_s\": \"0\","),
            "t.json: /events/0/start_s: expected a number, got \"0\"");
  EXPECT_EQ(message(small, "\"samples\": [[", "\"samples\": [[0], ["),
            "t.json: /memory/0/samples/0: expected [time_s, bytes]");
  // Memory entries are the devices' in order: one naming another device,
  // or more entries than devices, are refused (they were charged to the
  // entry's position).
  EXPECT_EQ(message(small, "{\"device\": 0, ", "{\"device\": 1, "),
            "t.json: /memory/0/device: expected 0: the memory entries list the devices in order, got 1");
  EXPECT_EQ(message(small, "]}\n  ]\n}", "]}, {\"device\": 2, \"samples\": []}\n  ]\n}"),
            "t.json: /memory/2: a memory entry for device 2 of a trace of 2 devices x 1 replicas");
  EXPECT_EQ(message(small, "\"version\": 1,", "\"version\": 1, \"extra\": 0,"),
            "t.json: /extra: unknown key (expected one of devices, events, format, memory, microbatches, partial, placement, "
            "replicas, source, stages, tensor_parallel, version)");
  // A version this reader does not know; a missing op kind says what it is.
  EXPECT_EQ(message(small, "\"version\": 1,", "\"version\": 2,"),
            "t.json: /version: this twinpipe reads trace version 1, got 2");
  EXPECT_EQ(message(small, "\"kind\": \"F\", ", ""),
            "t.json: /events/0: missing key 'kind' (an op kind such as F, B or SEND_F)");
  std::string swapped = WriteTraceJson(Small());
  swapped.replace(swapped.find("\"end_s\": 0.001"), 14, "\"end_s\": -1");
  EXPECT_EQ(ReadTraceJson(swapped, "t.json").error().message, "t.json: /events/0/end_s: ends before it starts");
}

}  // namespace
}  // namespace twinpipe::traces
