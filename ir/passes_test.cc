#include "ir/passes.h"

#include <gtest/gtest.h>

#include "ir/builders.h"
#include "ir/channels.h"
#include "ir/dependencies.h"
#include "ir/pipeline.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

namespace twinpipe::ir {
namespace {

std::string Line(const Schedule& s, int d) {
  std::string out;
  for (const Op& op : s.programs[d]) out += (out.empty() ? "" : " ") + OpToken(op);
  return out;
}

TEST(InsertRecompute, ExceptLastSparesTheLastMicroBatch) {
  Schedule s = BuildGpipe(1, 3);
  InsertRecompute(s, RecomputeMode::kExceptLast);
  EXPECT_EQ(Line(s, 0), "0F0 0F1 0F2 0B2 0R1 0B1 0R0 0B0 STEP");
}

TEST(InsertRecompute, GoesBeforeTheGradientReceive) {
  Schedule s = BuildGpipe(2, 1);
  ASSERT_TRUE(InsertComm(s, {}));
  InsertRecompute(s, RecomputeMode::kFull);
  EXPECT_EQ(Line(s, 0), "0F0 0SEND_F0 0R0 0RECV_B0 0B0 STEP");
  EXPECT_EQ(Line(s, 1), "1RECV_F0 1F0 1R0 1B0 1SEND_B0 STEP");
  EXPECT_TRUE(Verify(s).empty());
}

// Megatron-LM re-runs a cell's forward inside its backward call, once the
// gradient is in: the receive goes before R, and R waits for it. torchgpipe's
// timing (the default) lets R overlap the wait.
TEST(InsertComm, AGradientReceivedBeforeItsRecomputeInTheBackward) {
  for (const RecomputeTiming timing : {RecomputeTiming::kOverlapped, RecomputeTiming::kInBackward}) {
    Schedule s = Build1F1B(2, 2);
    InsertRecompute(s, RecomputeMode::kFull);
    ASSERT_TRUE(InsertComm(s, {}, timing));
    const bool in_backward = timing == RecomputeTiming::kInBackward;
    EXPECT_EQ(Line(s, 0), in_backward ? "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0R0 0B0 0RECV_B1 0R1 0B1 STEP"
                                      : "0F0 0SEND_F0 0F1 0SEND_F1 0R0 0RECV_B0 0B0 0R1 0RECV_B1 0B1 STEP");
    EXPECT_TRUE(Verify(s).empty());
    // R after the receive waits for it; before it, only for its F.
    const Dependencies deps(s);
    for (int32_t m = 0; m < 2; ++m) {
      const int32_t r = deps.Find(OpKind::kRecompute, 0, m), recv = deps.Find(OpKind::kRecvB, 0, m);
      bool waits = false;
      deps.ForEach(r, [&](int32_t dep) { waits |= dep == recv; });
      EXPECT_EQ(waits, in_backward) << RecomputeTimingName(timing) << " m=" << m;
    }
    EXPECT_EQ(RecomputeTimingFromName(RecomputeTimingName(timing)), timing);
  }
  EXPECT_FALSE(RecomputeTimingFromName("early"));
}

TEST(InsertRecompute, IsIdempotent) {
  Schedule s = Build1F1B(3, 5);
  InsertRecompute(s, RecomputeMode::kFull);
  Schedule again = s;
  InsertRecompute(again, RecomputeMode::kFull);
  EXPECT_EQ(again, s);
}

TEST(InsertComm, NoneBetweenStagesOnOneDevice) {
  // Four stages on two devices: 0,1 on device 0 and 2,3 on device 1.
  Schedule s = BuildGpipe(4, 2);
  s.placement = {0, 0, 1, 1};
  s.num_devices = 2;
  std::vector<std::vector<Op>> merged(2);
  for (int st = 0; st < 4; ++st) {
    for (const Op& op : s.programs[st]) {
      if (op.kind == OpKind::kForward) merged[st / 2].push_back(op);
    }
  }
  for (int st = 3; st >= 0; --st) {
    for (const Op& op : s.programs[st]) {
      if (op.kind == OpKind::kBackward) merged[st / 2].push_back(op);
    }
  }
  for (auto& p : merged) p.push_back(Op{.kind = OpKind::kStep});
  s.programs = merged;
  Renumber(s);
  ASSERT_TRUE(InsertComm(s, CommBytes{{10, 20, 30}, {11, 21, 31}}));
  EXPECT_EQ(Line(s, 0),
            "0F0 0F1 1F0 1SEND_F0@20 1F1 1SEND_F1@20 1RECV_B1@21 1B1 1RECV_B0@21 1B0 0B1 0B0 STEP");
  EXPECT_EQ(Line(s, 1),
            "2RECV_F0@20 2F0 2RECV_F1@20 2F1 3F0 3F1 3B1 3B0 2B1 2SEND_B1@21 2B0 2SEND_B0@21 STEP");
  auto d = Verify(s);
  EXPECT_TRUE(d.empty()) << FormatDiagnostic(s, d[0]);
}

TEST(InsertComm, ReceivesFollowTheSendersFifoOrder) {
  // Device 1 consumes micro-batch 1 before 0, but device 0 sends 0 first:
  // both receives must come before the first consumer, in send order.
  auto s = ParseText("0F0 0F1 0B1 0B0 STEP\n1F1 1F0 1B1 1B0 STEP\n", "t");
  ASSERT_TRUE(s);
  ASSERT_TRUE(InsertComm(*s, {}));
  EXPECT_EQ(Line(*s, 1), "1RECV_F0 1RECV_F1 1F1 1F0 1B1 1SEND_B1 1B0 1SEND_B0 STEP");
  EXPECT_TRUE(Verify(*s).empty());
}

// A paired F and its backward run as one (OVERLAP_F_B): both inputs are
// received before the F, both outputs sent after the backward; the text
// form keeps the pair ("+"), and the verifier holds its partner.
TEST(InsertComm, APairReceivesBeforeItsForwardAndSendsAfterItsBackward) {
  auto s = ParseText("0F0 0F1 0B0 0B1 STEP\n1F0 1F1+ 1B0 1B1 STEP\n", "t");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->programs[1][1].paired);
  ASSERT_TRUE(InsertComm(*s, {}));
  EXPECT_EQ(Line(*s, 0), "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 STEP");
  EXPECT_EQ(Line(*s, 1), "1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1 STEP");
  EXPECT_TRUE(Verify(*s).empty());
  EXPECT_NE(PrintText(*s).find(" 1F1+ 1B0 "), std::string::npos) << PrintText(*s);
  auto again = ParseText(PrintText(*s), "t");
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *s);
  // A gradient that arrives for the backward of a pair is received before its forward.
  auto v = ParseText("0F0 0F1+ 0B0 0B1 STEP\n1F0 1B0 1F1 1B1 STEP\n", "t");
  ASSERT_TRUE(v);
  ASSERT_TRUE(InsertComm(*v, {}));
  EXPECT_EQ(Line(*v, 0), "0F0 0SEND_F0 0RECV_B0 0F1 0B0 0SEND_F1 0RECV_B1 0B1 STEP");
  EXPECT_TRUE(Verify(*v).empty());
}

TEST(Verifier, APairedForwardNeedsTheNextBackward) {
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"0F0+ 0F1 0B0 0B1 STEP\n", "device 0, position 0 (0F0): a paired forward overlaps the next B or I, but "
                                        "0F1 (position 1) comes first"},
           {"0F0 0B0 0F1+\n", "device 0, position 2 (0F1): a paired forward needs a B or I after it to "
                                       "overlap with, and its program ends"},
       }) {
    auto s = ParseText(text, "t");
    ASSERT_TRUE(s);
    auto d = Verify(*s);
    ASSERT_FALSE(d.empty()) << text;
    EXPECT_EQ(FormatDiagnostic(*s, d[0]), message);
  }
  Schedule b = BuildGpipe(1, 1);
  b.programs[0][1].paired = true;  // the B
  auto d = Verify(b);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(FormatDiagnostic(b, d[0]), "device 0, position 1 (0B0): only a forward pairs with a backward (OVERLAP_F_B)");
  // InsertComm refuses a pair without its backward, naming it.
  auto lone = ParseText("0F0+ 0F1 0B0 0B1 STEP\n1F0 1F1 1B0 1B1 STEP\n", "t");
  ASSERT_TRUE(lone);
  auto r = InsertComm(*lone, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "device 0 position 0 (0F0): a paired forward needs its device's next op (recomputes "
                               "aside) to be a B or I");
}

TEST(InsertComm, RefusesASecondPass) {
  Schedule s = BuildGpipe(2, 2);
  ASSERT_TRUE(InsertComm(s, {}));
  auto again = InsertComm(s, {});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message,
            "device 0 position 1 (0SEND_F0): schedule already has comm ops");
}

TEST(InsertAllReduce, AfterTheLastBackwardOfEachStage) {
  Schedule s = Build1F1B(2, 2);
  s.replicas = 2;
  ASSERT_TRUE(InsertComm(s, {}));
  InsertAllReduce(s, {400, 500});
  EXPECT_EQ(Line(s, 0), "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0ALLREDUCE@400 STEP");
  EXPECT_EQ(Line(s, 1), "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1ALLREDUCE@500 STEP");
  EXPECT_TRUE(Verify(s).empty());
}


// The one pipeline: the passes in order, then the verifier. Its result is
// the passes run by hand, and a shape the passes cannot make right (here a
// forward dropped from the builder's output) is a runtime error naming it.
TEST(CompletePipeline, IsThePassesThenTheVerifier) {
  Schedule by_hand = Build1F1B(3, 4);
  by_hand.replicas = 2;
  InsertRecompute(by_hand, RecomputeMode::kFull);
  ASSERT_TRUE(InsertComm(by_hand, {{10, 20}, {30, 40}}));
  InsertAllReduce(by_hand, {1, 2, 3});
  Schedule s = Build1F1B(3, 4);
  s.replicas = 2;
  ASSERT_TRUE(CompletePipeline(s, {.recompute = RecomputeMode::kFull,
                                   .comm = {{10, 20}, {30, 40}},
                                   .gradient_bytes = {1, 2, 3}}));
  EXPECT_EQ(PrintText(s), PrintText(by_hand));

  Schedule broken = Build1F1B(2, 2);
  broken.programs[1].erase(broken.programs[1].begin());  // 1F0
  Renumber(broken);
  auto r = CompletePipeline(broken, {.what = "the test's schedule"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kRuntime);
  EXPECT_NE(r.error().message.find("the test's schedule does not verify:\n  "), std::string::npos) << r.error().message;
  // Read from a file, the same verdict is the user's input: bad input.
  auto read = VerifyOrFail(broken, "s.txt");
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().kind, ErrorKind::kBadInput);
  EXPECT_EQ(read.error().message.rfind("s.txt does not verify:", 0), 0u) << read.error().message;
}


// Channels pair the k-th send with the k-th receive per device pair, and are
// numbered by first send, device by device; a pair that only receives (a
// schedule the verifier would refuse) comes after them.
TEST(Channels, NumberedByFirstSendThenReceiveOnly) {
  Schedule s = Build1F1B(3, 2);
  ASSERT_TRUE(InsertComm(s, {}));
  const Channels ch(s);
  ASSERT_EQ(ch.size(), 4u);
  const std::vector<std::pair<int32_t, int32_t>> order{{0, 1}, {1, 2}, {1, 0}, {2, 1}};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(std::make_pair(ch[i].src, ch[i].dst), order[i]) << i;
    EXPECT_EQ(ch.Find(order[i].first, order[i].second), static_cast<int32_t>(i));
    ASSERT_EQ(ch[i].sends.size(), 2u);
    ASSERT_EQ(ch[i].recvs.size(), 2u);
    // Paired in FIFO order: micro-batch 0, then 1, each side.
    std::vector<const Op*> ops(s.NumOps());
    for (const auto& program : s.programs) {
      for (const Op& op : program) ops[op.id] = &op;
    }
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(ops[ch[i].sends[k]]->micro_batch, static_cast<int32_t>(k));
      EXPECT_EQ(ops[ch[i].recvs[k]]->micro_batch, static_cast<int32_t>(k));
    }
  }
  EXPECT_EQ(ch.Find(0, 2), -1);
  // Device 2's sends to device 1 dropped: (2, 1) only receives now.
  for (auto& op : s.programs[2]) {
    if (op.kind == OpKind::kSendB) op.kind = OpKind::kBackwardWeight;  // any non-comm kind
  }
  const Channels after(s);
  ASSERT_EQ(after.size(), 4u);
  EXPECT_EQ(after[3].src, 2);
  EXPECT_TRUE(after[3].sends.empty());
  EXPECT_EQ(after[3].recvs.size(), 2u);
}

}  // namespace
}  // namespace twinpipe::ir
