#include "traces/compare.h"

#include <gtest/gtest.h>

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
