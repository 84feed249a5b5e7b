// ir::InFlightCounter, held against a brute-force count, as the memory model
// walks programs and as both engines count a simulated step.
#include "ir/in_flight.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "ir/builders.h"
#include "ir/passes.h"
#include "ir/verifier.h"
#include "simulate/engine.h"

namespace twinpipe::simulate {
namespace {

using ir::OpKind;

// Per stage: after each op of its device's program, the micro-batches whose
// F is at or before it and whose last backward (B, or W) is after it; the
// most over the program.
std::vector<int32_t> BruteForcePeak(const ir::Schedule& s) {
  std::vector<int32_t> peak(s.num_stages, 0);
  for (int32_t st = 0; st < s.num_stages; ++st) {
    const auto& program = s.programs[s.placement[st]];
    const auto n = static_cast<ptrdiff_t>(program.size());
    std::vector<ptrdiff_t> forward(s.num_micro_batches, n), freed(s.num_micro_batches, n);
    for (ptrdiff_t i = 0; i < n; ++i) {
      const ir::Op& op = program[i];
      if (op.stage != st) continue;
      if (op.kind == OpKind::kForward) forward[op.micro_batch] = i;
      if (op.kind == OpKind::kBackward || op.kind == OpKind::kBackwardWeight) freed[op.micro_batch] = i;
    }
    for (ptrdiff_t i = 0; i < n; ++i) {
      int32_t held = 0;
      for (int32_t m = 0; m < s.num_micro_batches; ++m) held += forward[m] <= i && freed[m] > i;
      peak[st] = std::max(peak[st], held);
    }
  }
  return peak;
}

TEST(InFlightCounter, MatchesABruteForceCountOverEverySchedule) {
  int cases = 0;
  for (const std::string& name : ir::BuilderNames()) {
    for (int32_t chunks : ir::ChunkChoices(name)) {
      for (int32_t K : {1, 2, 3, 4, 6}) {
        for (int32_t M : {1, 2, 3, 4, 8, 12, 13}) {
          if (!ir::CheckShape(name, K, M, chunks)) continue;
          for (auto mode : {ir::RecomputeMode::kNone, ir::RecomputeMode::kFull, ir::RecomputeMode::kExceptLast}) {
            const std::string what = fmt::format("{} v={} K={} M={} recompute {}", name, chunks, K, M,
                                                 ir::RecomputeModeName(mode));
            ir::Schedule s = *ir::BuildByName(name, K, M, chunks);
            ir::InsertRecompute(s, mode);
            const std::vector<int64_t> bytes(s.num_stages - 1, 4096);
            ASSERT_TRUE(ir::InsertComm(s, {bytes, bytes})) << what;
            ASSERT_TRUE(ir::Verify(s).empty()) << what;
            const std::vector<int32_t> expected = BruteForcePeak(s);

            ir::InFlightCounter counter(s.num_stages);
            for (const auto& program : s.programs) {
              for (const ir::Op& op : program) counter.Ended(op);
            }
            EXPECT_EQ(counter.Peak(), expected) << what;
            // A whole step frees every micro-batch it forwards.
            EXPECT_EQ(counter.Now(), std::vector<int32_t>(s.num_stages, 0)) << what;

            const PlanCosts costs = UniformCosts(s, 1e-3, 2e-3);
            auto in_order = SimulateInOrder(s, costs);
            auto event_driven = SimulateEventDriven(s, costs);
            ASSERT_TRUE(in_order && event_driven) << what;
            EXPECT_EQ(in_order->peak_in_flight, expected) << what;
            EXPECT_EQ(event_driven->peak_in_flight, expected) << what;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 300);
}

TEST(InFlightCounter, IgnoresOtherOpsAndStagesOutOfRange) {
  ir::InFlightCounter counter(2);
  for (OpKind kind : {OpKind::kBackwardInput, OpKind::kRecompute, OpKind::kSendF, OpKind::kRecvB,
                      OpKind::kAllReduce, OpKind::kStep}) {
    counter.Ended(kind, 0);
  }
  counter.Ended(OpKind::kForward, -1);
  counter.Ended(OpKind::kForward, 2);
  EXPECT_EQ(counter.Peak(), (std::vector<int32_t>{0, 0}));
  counter.Ended(OpKind::kForward, 1);
  counter.Ended(OpKind::kForward, 1);
  counter.Ended(OpKind::kBackward, 1);
  counter.Ended(OpKind::kForward, 1);
  EXPECT_EQ(counter.Peak(), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(counter.Now(), (std::vector<int32_t>{0, 2}));
}

}  // namespace
}  // namespace twinpipe::simulate
