#include "traces/schedule_trace.h"

#include <utility>

namespace twinpipe::traces {

Stream StreamOf(ir::OpKind kind) {
  if (ir::IsSend(kind)) return Stream::kSend;
  if (ir::IsRecv(kind)) return Stream::kRecv;
  if (kind == ir::OpKind::kAllReduce) return Stream::kAllReduce;
  return Stream::kCompute;
}

Trace TraceFor(const ir::Schedule& s, std::string source) {
  Trace t;
  t.source = std::move(source);
  t.stages = s.num_stages;
  t.micro_batches = s.num_micro_batches;
  t.devices = s.num_devices;
  t.replicas = s.replicas;
  t.placement = s.placement;
  t.events.reserve(static_cast<size_t>(s.NumOps()));
  int32_t id = 0;
  for (int32_t device = 0; device < static_cast<int32_t>(s.programs.size()); ++device) {
    for (const ir::Op& op : s.programs[device]) {
      t.events.push_back(Event{.id = id++, .device = device, .stream = StreamOf(op.kind), .kind = op.kind,
                               .stage = op.stage, .micro_batch = op.micro_batch, .peer = op.peer, .bytes = op.bytes});
    }
  }
  return t;
}

}  // namespace twinpipe::traces
