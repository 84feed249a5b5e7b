#include "ir/torch_csv.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ir/builders.h"
#include "ir/passes.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

namespace twinpipe::ir {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(TWINPIPE_TORCH_DIR) + "/" + name);
  EXPECT_TRUE(in) << "missing fixture " << name;
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

int64_t Count(const Schedule& s, OpKind k) {
  int64_t n = 0;
  for (const auto& p : s.programs) {
    for (const Op& op : p) n += op.kind == k;
  }
  return n;
}

TEST(TorchCsv, OlderDialectComputeOnly) {
  auto r = ImportTorchCsv(Fixture("zb1p_2rank_2stagep_compute.csv"), "zb.csv", TorchDialect::kAuto);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->dialect, TorchDialect::kOlder);
  EXPECT_FALSE(r->had_comm);
  EXPECT_EQ(r->idle_slots, 2);
  const Schedule& s = r->schedule;
  EXPECT_EQ(s.num_stages, 4);
  EXPECT_EQ(s.num_micro_batches, 8);
  EXPECT_EQ(s.placement, (std::vector<int32_t>{0, 1, 0, 1}));
  EXPECT_EQ(Count(s, OpKind::kBackwardInput), 32);
  EXPECT_EQ(Count(s, OpKind::kBackwardWeight), 32);
  EXPECT_EQ(Count(s, OpKind::kSendF), 24);  // three cross-device boundaries x 8
  auto d = Verify(s);
  EXPECT_TRUE(d.empty()) << FormatDiagnostic(s, d[0]);
}

TEST(TorchCsv, OlderDialectWithCommIsKeptAsWrittenAndVerifies) {
  const std::string text = Fixture("zb1p_2rank_2stagep_comms.csv");
  auto r = ImportTorchCsv(text, "zbc.csv", TorchDialect::kAuto);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->dialect, TorchDialect::kOlder);
  EXPECT_TRUE(r->had_comm);
  auto d = Verify(r->schedule);
  EXPECT_TRUE(d.empty()) << FormatDiagnostic(r->schedule, d[0]);
  // Nothing was added but STEP, so exporting gives the file back byte for byte.
  EXPECT_EQ(ExportTorchCsv(r->schedule, TorchDialect::kOlder), text);
}

TEST(TorchCsv, CurrentDialectDualPipeV) {
  auto r = ImportTorchCsv(Fixture("dualpipev_4rank_10mb.csv"), "dp.csv", TorchDialect::kAuto);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->dialect, TorchDialect::kCurrent);
  EXPECT_GT(r->overlapped, 0);
  const Schedule& s = r->schedule;
  EXPECT_EQ(s.num_stages, 8);
  EXPECT_EQ(s.num_micro_batches, 10);
  EXPECT_EQ(s.placement, (std::vector<int32_t>{0, 1, 2, 3, 3, 2, 1, 0}));
  auto d = Verify(s);
  EXPECT_TRUE(d.empty()) << FormatDiagnostic(s, d[0]);
}

// The dualpipev builder writes, device by device, the compute ops of the
// schedule torch.distributed.pipelining wrote for K = 4, M = 10 (its
// overlapped F/B pairs as their two ops in order).
TEST(TorchCsv, DualPipeVBuilderIsTorchsSchedule) {
  auto r = ImportTorchCsv(Fixture("dualpipev_4rank_10mb.csv"), "dp.csv", TorchDialect::kAuto);
  ASSERT_TRUE(r) << r.error().message;
  auto built = BuildByName("dualpipev", 4, 10);
  ASSERT_TRUE(built) << built.error().message;
  ASSERT_EQ(built->placement, r->schedule.placement);
  auto compute = [](const std::vector<Op>& program) {
    std::string out;
    for (const Op& op : program) {
      if (!IsComm(op.kind) && op.kind != OpKind::kStep) out += OpToken(op) + " ";
    }
    return out;
  };
  for (int32_t d = 0; d < 4; ++d) {
    EXPECT_EQ(compute(built->programs[d]), compute(r->schedule.programs[d])) << "device " << d;
  }
  EXPECT_FALSE(BuildByName("dualpipev", 4, 7));  // M >= 2K
}

TEST(TorchCsv, ExportImportRoundTripsEveryBuilder) {
  AutoProblem auto_problem{.stages = 4, .micro_batches = 8, .forward_s = {1, 2, 1, 1}, .input_s = {1, 1, 2, 1},
                           .weight_s = {1, 1, 1, 0.5}, .comm_s = {0.1, 0.1, 0.1, 0}, .activation_bytes = {1, 1, 1, 1},
                           .kept_bytes = {1, 1, 1, 1}, .pending_bytes = {0.5, 0.5, 0.5, 0.5},
                           .limit_bytes = {6, 5, 4, 3}};
  for (const auto& name : ScheduleNames()) {
    for (TorchDialect dialect : {TorchDialect::kCurrent, TorchDialect::kOlder}) {
      Schedule s = name == kAutoSchedule ? *BuildAuto(auto_problem) : *BuildByName(name, 4, 8);
      ASSERT_TRUE(InsertComm(s, {}));
      const std::string csv = ExportTorchCsv(s, dialect);
      auto back = ImportTorchCsv(csv, "x.csv", dialect);
      ASSERT_TRUE(back) << back.error().message;
      EXPECT_EQ(back->schedule, s) << name;
      EXPECT_EQ(ExportTorchCsv(back->schedule, dialect), csv);
    }
  }
}

TEST(TorchCsv, ForcedDialectsDisagreeingWithTheFileAreErrors) {
  auto r = ImportTorchCsv("0F0,0I0,0W0\n", "a.csv", TorchDialect::kOlder);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "a.csv:1: cell 2: I belongs to the current dialect, but the older one was forced");
  auto forced = ImportTorchCsv("0F0,0BW0\n", "b.csv", TorchDialect::kCurrent);
  ASSERT_FALSE(forced);
  EXPECT_EQ(forced.error().message,
            "b.csv:1: cell 2: BW belongs to the older dialect, but the current one was forced");
  // With only F and B, current is assumed: B is a full backward.
  auto plain = ImportTorchCsv("0F0,0B0\n", "c.csv", TorchDialect::kAuto);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->schedule.programs[0][1].kind, OpKind::kBackward);
  auto older = ImportTorchCsv("0F0,0B0\n", "c.csv", TorchDialect::kOlder);
  ASSERT_TRUE(older);
  EXPECT_EQ(older->schedule.programs[0][1].kind, OpKind::kBackwardInput);
}

TEST(TorchCsv, BadCellsNameLineAndCell) {
  auto r = ImportTorchCsv("0F0,0F1\n1F0,1Q0\n", "bad.csv", TorchDialect::kAuto);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "bad.csv:2: cell 2: '1Q0': action Q is not supported (twinpipe reads F, I, W, B, BW, "
            "SEND_F, RECV_F, SEND_B, RECV_B and OVERLAP_F_B)");
  auto o = ImportTorchCsv("(0F0;0B0\n", "o.csv", TorchDialect::kAuto);
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().message, "o.csv:1: cell 1: '(0F0;0B0': expected (<forward>;<backward>)OVERLAP_F_B");
  auto x = ImportTorchCsv("0F0,F1\n", "x.csv", TorchDialect::kAuto);
  ASSERT_FALSE(x);
  EXPECT_EQ(x.error().message,
            "x.csv:1: cell 2: 'F1': expected <stage><ACTION><micro-batch> such as 0F0 or 2SEND_B3");
}

}  // namespace
}  // namespace twinpipe::ir
