// The trace: what happened (measured) or will happen (predicted) in one
// training step, op by op. The simulator and the executor write this same
// format, so the two can be compared and rendered alike.
//
//   Trace t = ...;  WriteTraceJson(t) -> {"format": "twinpipe-trace", ...}
//   auto back = ReadTraceJson(text, "step.json");
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/op.h"
#include "ir/result.h"

namespace twinpipe::traces {

enum class Stream : uint8_t { kCompute, kSend, kRecv, kAllReduce };
std::string_view StreamName(Stream stream);

struct Event {
  int32_t id = 0;           // the IR op id
  int32_t device = 0;
  Stream stream = Stream::kCompute;
  ir::OpKind kind = ir::OpKind::kForward;
  int32_t stage = -1;
  int32_t micro_batch = -1;
  int32_t peer = -1;
  double start_s = 0;
  double end_s = 0;
  int64_t bytes = 0;

  bool operator==(const Event&) const = default;
};

struct MemorySample {
  double time_s = 0;
  double bytes = 0;
  bool operator==(const MemorySample&) const = default;
};

struct Trace {
  std::string source;  // "simulate" or "execute:<backend>"
  int32_t stages = 0;
  int32_t micro_batches = 0;
  int32_t devices = 0;
  int32_t replicas = 1;
  // GPUs per device, a tensor-parallel group in Megatron's order: device d
  // of replica r is GPUs t (d + devices r) .. t (d + devices r) + t - 1.
  // Written only when above 1.
  int32_t tensor_parallel = 1;
  std::vector<int32_t> placement;
  std::vector<Event> events;                       // in op id order
  std::vector<std::vector<MemorySample>> memory;   // per device, time-ordered
  // Times some of the schedule's ops only (a profile that labels some, as
  // torch.profiler's of torch.distributed.pipelining): compare holds the
  // prediction's same ops against them. Written only when true.
  bool partial = false;

  bool operator==(const Trace&) const = default;
};

// Native JSON, one event per line; deterministic (shortest round-trip
// numbers), so the same trace gives byte-identical text.
std::string WriteTraceJson(const Trace& trace);
Result<Trace> ReadTraceJson(std::string_view text, std::string_view source);

// Chrome / Perfetto trace-event JSON: a process per device, a thread per
// stream, a flow arrow from each send to its receive, a memory counter per
// device. Times in microseconds.
std::string WriteChromeTrace(const Trace& trace);

}  // namespace twinpipe::traces
