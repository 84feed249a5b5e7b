#include "traces/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "ir/builders.h"
#include "ir/pipeline.h"
#include "traces/schedule_trace.h"
#include "traces/svg_timeline.h"

namespace twinpipe::traces {
namespace {

Trace Pipeline(double scale) {
  // Two devices, one micro-batch: F, send, then recv, F.
  Trace t;
  t.source = "simulate";
  t.stages = 2;
  t.micro_batches = 1;
  t.devices = 2;
  t.placement = {0, 1};
  using ir::OpKind;
  t.events = {
      {0, 0, Stream::kCompute, OpKind::kForward, 0, 0, -1, 0, 2 * scale, 0},
      {1, 0, Stream::kSend, OpKind::kSendF, 0, 0, 1, 2 * scale, 3 * scale, 64},
      {2, 1, Stream::kRecv, OpKind::kRecvF, 1, 0, 0, 2 * scale, 3 * scale, 64},
      {3, 1, Stream::kCompute, OpKind::kForward, 1, 0, -1, 3 * scale, 4 * scale, 0},
  };
  t.memory = {{{0, 100}, {1, 300 * scale}}, {{0, 50}}};
  return t;
}

TEST(Summarize, StepBusyBubblePeak) {
  const TraceSummary s = Summarize(Pipeline(1));
  EXPECT_DOUBLE_EQ(s.step_time_s, 4);
  EXPECT_DOUBLE_EQ(s.busy_s[0], 2);
  EXPECT_DOUBLE_EQ(s.busy_s[1], 1);
  EXPECT_DOUBLE_EQ(s.bubble_fraction, 1 - 3.0 / 8);
  EXPECT_DOUBLE_EQ(s.peak_memory_bytes[0], 300);
}

TEST(Compare, IdenticalTracesHaveNoError) {
  auto c = Compare(Pipeline(1), Pipeline(1));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->step_time_error, 0);
  for (const auto& k : c->per_kind) EXPECT_EQ(k.worst_error, 0) << k.kind;
  EXPECT_EQ(c->worst.size(), 4u);
}

TEST(Compare, ScaledMeasurementGivesTheScaleAsError) {
  auto c = Compare(Pipeline(1), Pipeline(2));  // measured twice as slow
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->step_time_error, -0.5);
  for (const auto& k : c->per_kind) {
    EXPECT_DOUBLE_EQ(k.median_error, 0.5) << k.kind;
  }
  EXPECT_DOUBLE_EQ(c->devices[0].busy_error, -0.5);
  EXPECT_DOUBLE_EQ(c->devices[0].peak_memory_error, -0.5);
  EXPECT_DOUBLE_EQ(c->bubble_fraction_predicted, c->bubble_fraction_measured);
}

// An op measured at no time (torch's ZBV runs nothing for the first
// stage's input gradient) has no relative error: counted apart, out of the
// median, the worst and the ten largest, and said so.
TEST(Compare, OpsMeasuredAtNoTimeAreCountedApart) {
  Trace measured = Pipeline(1);
  measured.events[3].end_s = measured.events[3].start_s;  // stage 1's F
  auto c = Compare(Pipeline(1), measured);
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c->per_kind.size(), 3u);
  for (const auto& k : c->per_kind) {
    EXPECT_TRUE(std::isfinite(k.median_error) && std::isfinite(k.worst_error)) << k.kind;
    EXPECT_EQ(k.zero_time, k.kind == "F" ? 1 : 0) << k.kind;
    EXPECT_EQ(k.count, 1) << k.kind;
  }
  EXPECT_EQ(c->worst.size(), 3u);
  EXPECT_NE(ComparisonTable(*c).find("and 1 measured at no time (no relative error)"), std::string::npos);
  EXPECT_NE(ComparisonJson(*c).find("\"zero_time\": 1"), std::string::npos);
}

TEST(Compare, DifferentSchedulesAreBadInput) {
  Trace other = Pipeline(1);
  other.micro_batches = 2;
  EXPECT_EQ(Compare(Pipeline(1), other).error().message,
            "the traces are of different schedules: 1 micro-batches predicted, 2 measured");
  Trace moved = Pipeline(1);
  moved.events[3].stage = 0;
  moved.events[3].device = 1;
  EXPECT_EQ(Compare(Pipeline(1), moved).error().message,
            "the traces are of different schedules: device 1 measured 0F0, which the prediction does not have");
}

// A trace of one config (K = 2 stages on 2 devices, M = 4 micro-batches,
// 1 KiB crossing the boundary each way) under a real builder, completed as
// simulate and execute complete it; op i runs from i to i + `duration` s.
Trace Built(ir::Schedule s, double duration) {
  const auto ok = ir::CompletePipeline(s, {.comm = {.activation = {1024}, .gradient = {1024}}});
  EXPECT_TRUE(ok) << ok.error().message;
  Trace t = TraceFor(s, "simulate");
  for (Event& e : t.events) {
    e.start_s = e.id;
    e.end_s = e.id + duration;
  }
  return t;
}

TEST(Compare, SameScheduleIsAccepted) {
  auto c = Compare(Built(ir::Build1F1B(2, 4), 1), Built(ir::Build1F1B(2, 4), 0.5));
  ASSERT_TRUE(c) << c.error().message;
  for (const auto& k : c->per_kind) EXPECT_DOUBLE_EQ(k.worst_error, 1) << k.kind;  // predicted twice the measured
}

// GPipe and 1F1B of one config hold the same ops, so they align op by op;
// their order differs. Device 0 (stage 0) sends each forward's activation at
// once: GPipe runs F0 F1 F2 F3 (positions 0, 2, 4, 6), 1F1B warms up with
// K - 1 = 1 forward and, after F1, receives and runs B0.
TEST(Compare, GpipeAgainst1F1BIsRefusedAtTheFirstOpOutOfOrder) {
  const Trace gpipe = Built(ir::BuildGpipe(2, 4), 1), one_f_one_b = Built(ir::Build1F1B(2, 4), 1);
  auto c = Compare(gpipe, one_f_one_b);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message,
            "the traces are of different schedules: the op order differs first at device 0, position 4: "
            "predicted 0F2, measured 0RECV_B0");
  auto reversed = Compare(one_f_one_b, gpipe);
  ASSERT_FALSE(reversed);
  EXPECT_EQ(reversed.error().message,
            "the traces are of different schedules: the op order differs first at device 0, position 4: "
            "predicted 0RECV_B0, measured 0F2");
}

TEST(Compare, NamesTheFirstDeviceWhoseOrderDiffers) {
  const Trace gpipe = Built(ir::BuildGpipe(2, 4), 1);
  // Device 1 (stage 1) receives micro-batch 0's activation, then runs its F.
  Trace swapped = gpipe;
  Event* first = nullptr;
  for (Event& e : swapped.events) {
    if (e.device != 1) continue;
    if (!first) {
      first = &e;
      continue;
    }
    std::swap(first->kind, e.kind);
    std::swap(first->stream, e.stream);
    break;
  }
  auto c = Compare(gpipe, swapped);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message,
            "the traces are of different schedules: the op order differs first at device 1, position 0: "
            "predicted 1RECV_F0, measured 1F0");
}

TEST(RenderTimelineSvg, DrawsEveryEventOfBothTraces) {
  const std::string svg = RenderTimelineSvg(Pipeline(1), nullptr, "predicted", "");
  size_t boxes = 0;
  for (size_t at = svg.find("<title>"); at != std::string::npos; at = svg.find("<title>", at + 1)) ++boxes;
  EXPECT_EQ(boxes, 4u);
  const Trace measured = Pipeline(2);
  const std::string both = RenderTimelineSvg(Pipeline(1), &measured, "predicted", "measured");
  boxes = 0;
  for (size_t at = both.find("<title>"); at != std::string::npos; at = both.find("<title>", at + 1)) ++boxes;
  EXPECT_EQ(boxes, 8u);
  EXPECT_NE(both.find("device 1 measured"), std::string::npos);
  EXPECT_EQ(both.rfind("</svg>\n"), both.size() - 7);
}

}  // namespace
}  // namespace twinpipe::traces
