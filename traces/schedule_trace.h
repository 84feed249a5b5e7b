// A schedule's trace before anything is timed: the header (source, stages,
// micro-batches, devices, replicas, placement) and one event per op on its
// stream. The simulator's report and the executor both start from it and
// fill in only times and memory, so their traces cannot differ in anything
// else. The schedule's ids must be canonical (the verifier checks that).
//
//   Trace t = TraceFor(schedule, "simulate");
//   for (Event& e : t.events) { e.start_s = start_s[e.id]; e.end_s = end_s[e.id]; }
#pragma once

#include <string>

#include "ir/op.h"
#include "ir/schedule.h"
#include "traces/trace.h"

namespace twinpipe::traces {

// The stream an op runs on: sends, receives and all-reduces each on their
// own, everything else (F, B, I, W, R, STEP) on compute.
Stream StreamOf(ir::OpKind kind);

// Events in id order (device by device, each in program order), with their
// device, stream, kind, stage, micro-batch, peer and bytes; times 0; no
// memory samples; tensor_parallel 1 (the schedule does not know it).
Trace TraceFor(const ir::Schedule& schedule, std::string source);

}  // namespace twinpipe::traces
