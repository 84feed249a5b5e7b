#include "traces/schedule_trace.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ir/builders.h"
#include "ir/pipeline.h"

namespace twinpipe::traces {
namespace {

// DESIGN.md section 7: a thread per stream; transfers and the gradient
// all-reduce beside compute. Written out by name, kind by kind.
const std::map<std::string, std::string> kStreamByKind = {
    {"F", "compute"},      {"B", "compute"},      {"I", "compute"},    {"W", "compute"},
    {"R", "compute"},      {"STEP", "compute"},   {"SEND_F", "send"},  {"SEND_B", "send"},
    {"RECV_F", "recv"},    {"RECV_B", "recv"},    {"ALLREDUCE", "allreduce"},
};

TEST(StreamOf, EveryKindOnItsStream) {
  ASSERT_EQ(kStreamByKind.size(), static_cast<size_t>(ir::kNumOpKinds));
  for (int k = 0; k < ir::kNumOpKinds; ++k) {
    const auto kind = static_cast<ir::OpKind>(k);
    EXPECT_EQ(StreamName(StreamOf(kind)), kStreamByKind.at(std::string(ir::OpKindName(kind)))) << ir::OpKindName(kind);
  }
}

// 1F1B on 3 devices, 4 micro-batches, 2 replicas (so ALLREDUCE is there).
ir::Schedule Completed() {
  ir::Schedule s = ir::Build1F1B(3, 4);
  s.replicas = 2;
  const auto ok = ir::CompletePipeline(s, {.recompute = ir::RecomputeMode::kFull,
                                           .comm = {.activation = {100, 200}, .gradient = {300, 400}},
                                           .gradient_bytes = {10, 20, 30}});
  EXPECT_TRUE(ok) << ok.error().message;
  return s;
}

TEST(TraceFor, HeaderIsTheSchedulesShape) {
  const ir::Schedule s = Completed();
  const Trace t = TraceFor(s, "execute:cpu");
  EXPECT_EQ(t.source, "execute:cpu");
  EXPECT_EQ(t.stages, 3);
  EXPECT_EQ(t.micro_batches, 4);
  EXPECT_EQ(t.devices, 3);
  EXPECT_EQ(t.replicas, 2);
  EXPECT_EQ(t.tensor_parallel, 1);
  EXPECT_EQ(t.placement, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(t.memory.empty());
}

TEST(TraceFor, OneUntimedEventPerOpInProgramOrder) {
  const ir::Schedule s = Completed();
  const Trace t = TraceFor(s, "simulate");
  ASSERT_EQ(static_cast<int64_t>(t.events.size()), s.NumOps());
  size_t i = 0;
  std::map<std::string, int> streams;
  for (int32_t d = 0; d < s.num_devices; ++d) {
    for (const ir::Op& op : s.programs[d]) {
      SCOPED_TRACE(::testing::Message() << "device " << d << " op " << ir::OpToken(op));
      const Event& e = t.events[i];
      EXPECT_EQ(e.id, static_cast<int32_t>(i));
      EXPECT_EQ(e.device, d);
      EXPECT_EQ(e.kind, op.kind);
      EXPECT_EQ(e.stage, op.stage);
      EXPECT_EQ(e.micro_batch, op.micro_batch);
      EXPECT_EQ(e.peer, op.peer);
      EXPECT_EQ(e.bytes, op.bytes);
      EXPECT_EQ(e.start_s, 0);
      EXPECT_EQ(e.end_s, 0);
      ++streams[std::string(StreamName(e.stream))];
      ++i;
    }
  }
  // 2 boundaries x 4 micro-batches x 2 directions: 16 sends and 16 receives;
  // an ALLREDUCE per stage.
  EXPECT_EQ(streams["send"], 16);
  EXPECT_EQ(streams["recv"], 16);
  EXPECT_EQ(streams["allreduce"], 3);
  // F, R, B per (stage, micro-batch), a STEP per device.
  EXPECT_EQ(streams["compute"], 3 * 3 * 4 + 3);
}

}  // namespace
}  // namespace twinpipe::traces
