#include "ir/torch_csv.h"

#include <gtest/gtest.h>

#include <gmock/gmock.h>

#include <fstream>
#include <regex>

#include <fmt/format.h>
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
  // Nothing was added but STEP. torch 2.5 cannot run it (its B is one kind
  // of backward per schedule, and this one has both); 2.6's names give the
  // file back token for token (BW -> B, B -> I).
  auto older = ExportTorchCsv(r->schedule, {.version = {2, 5}});
  ASSERT_FALSE(older);
  EXPECT_THAT(older.error().message, ::testing::HasSubstr("reads B as one kind of backward for a whole schedule"));
  std::string renamed = std::regex_replace(text, std::regex("(\\d)B(\\d)"), "$1I$2");
  renamed = std::regex_replace(renamed, std::regex("(\\d)BW(\\d)"), "$1B$2");
  auto current = ExportTorchCsv(r->schedule, {.version = {2, 6}});
  ASSERT_TRUE(current) << current.error().message;
  EXPECT_EQ(*current, renamed);
}

TEST(TorchCsv, CurrentDialectDualPipeV) {
  auto r = ImportTorchCsv(Fixture("dualpipev_4rank_10mb.csv"), "dp.csv", TorchDialect::kAuto);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->dialect, TorchDialect::kCurrent);
  EXPECT_GT(r->overlapped, 0);
  const Schedule& s = r->schedule;
  int paired = 0;  // every OVERLAP_F_B cell of torch's is a forward and a backward
  for (const auto& program : s.programs) {
    for (const Op& op : program) paired += op.paired;
  }
  EXPECT_EQ(paired, r->overlapped);
  EXPECT_EQ(s.num_stages, 8);
  EXPECT_EQ(s.num_micro_batches, 10);
  EXPECT_EQ(s.placement, (std::vector<int32_t>{0, 1, 2, 3, 3, 2, 1, 0}));
  auto d = Verify(s);
  EXPECT_TRUE(d.empty()) << FormatDiagnostic(s, d[0]);
}

// The dualpipev builder writes, device by device, the compute ops of the
// schedule torch.distributed.pipelining wrote for K = 4, M = 10 (its
// overlapped F/B pairs as their two ops in order, the F paired).
TEST(TorchCsv, DualPipeVBuilderIsTorchsSchedule) {
  auto r = ImportTorchCsv(Fixture("dualpipev_4rank_10mb.csv"), "dp.csv", TorchDialect::kAuto);
  ASSERT_TRUE(r) << r.error().message;
  auto built = BuildByName("dualpipev", 4, 10);
  ASSERT_TRUE(built) << built.error().message;
  ASSERT_EQ(built->placement, r->schedule.placement);
  auto compute = [](const std::vector<Op>& program) {
    std::string out;
    for (const Op& op : program) {
      if (!IsComm(op.kind) && op.kind != OpKind::kStep) out += OpToken(op) + (op.paired ? "+ " : " ");
    }
    return out;
  };
  for (int32_t d = 0; d < 4; ++d) {
    EXPECT_EQ(compute(built->programs[d]), compute(r->schedule.programs[d])) << "device " << d;
  }
  EXPECT_FALSE(BuildByName("dualpipev", 4, 7));  // M >= 2K
}

int CountCells(const std::string& csv, const std::string& suffix_of_action) {
  // Cells whose action is exactly `suffix_of_action` ("REDUCE_GRAD" matches
  // 0REDUCE_GRAD, not 0WAIT_REDUCE_GRAD).
  const std::regex cell("(^|,)\\d+" + suffix_of_action + "\\d*(?=,|$)", std::regex::multiline);
  return static_cast<int>(std::distance(std::sregex_iterator(csv.begin(), csv.end(), cell), std::sregex_iterator()));
}

// Whether torch 2.5.1's runtime can run the placement at all: two or more
// stages on every device, and no two adjacent stages on one device.
bool Torch25Runs(const Schedule& s) {
  std::map<int32_t, int> per_device;
  for (int32_t d : s.placement) ++per_device[d];
  for (auto [device, count] : per_device) {
    if (count < 2) return false;
  }
  for (size_t i = 0; i + 1 < s.placement.size(); ++i) {
    if (s.placement[i] == s.placement[i + 1]) return false;
  }
  return true;
}

// Every builder, every release's form: what twinpipe writes, it reads back as
// the same schedule; the comm form holds the REDUCE_GRAD (2.10 on, one per
// stage) and waits (2.15: one per send, one per REDUCE_GRAD) the release
// needs; the compute-only form holds compute actions only.
TEST(TorchCsv, ExportImportRoundTripsEveryBuilderAndRelease) {
  AutoProblem auto_problem{.stages = 4, .micro_batches = 8, .forward_s = {1, 2, 1, 1}, .input_s = {1, 1, 2, 1},
                           .weight_s = {1, 1, 1, 0.5}, .comm_s = {0.1, 0.1, 0.1, 0}, .activation_bytes = {1, 1, 1, 1},
                           .kept_bytes = {1, 1, 1, 1}, .pending_bytes = {0.5, 0.5, 0.5, 0.5},
                           .limit_bytes = {6, 5, 4, 3}};
  for (const auto& name : ScheduleNames()) {
    Schedule s = name == kAutoSchedule ? *BuildAuto(auto_problem) : *BuildByName(name, 4, 8);
    Schedule unpaired = s;  // as torch before 2.9 reads it back: no pairs, comm placed for ops run in turn
    for (auto& program : unpaired.programs) {
      for (Op& op : program) op.paired = false;
    }
    ASSERT_TRUE(InsertComm(s, {}));
    const int64_t sends = Count(s, OpKind::kSendF) + Count(s, OpKind::kSendB);
    const bool full = Count(s, OpKind::kBackward) > 0;
    const bool split = Count(s, OpKind::kBackwardInput) > 0;
    for (TorchVersion v : {TorchVersion{2, 5}, TorchVersion{2, 6}, TorchVersion{2, 9}, TorchVersion{2, 10},
                           TorchVersion{2, 14}, TorchVersion{2, 15}}) {
      for (bool compute_only : {false, true}) {
        const std::string what = fmt::format("{} torch {}.{}{}", name, v.major, v.minor,
                                             compute_only ? " compute-only" : "");
        TorchExportNotes notes;
        auto csv = ExportTorchCsv(s, {.version = v, .compute_only = compute_only}, &notes);
        if (v == TorchVersion{2, 5} && ((full && (split || compute_only)) || !Torch25Runs(s))) {
          ASSERT_FALSE(csv) << what;
          continue;
        }
        ASSERT_TRUE(csv) << what << ": " << csv.error().message;
        const int reduce = CountCells(*csv, "REDUCE_GRAD");
        const int wait_reduce = CountCells(*csv, "WAIT_REDUCE_GRAD");
        const int wait_send = CountCells(*csv, "WAIT_SEND_F") + CountCells(*csv, "WAIT_SEND_B");
        const bool comm = !compute_only;
        const bool v26 = v >= TorchVersion{2, 6}, v210 = v >= TorchVersion{2, 10}, v215 = v >= TorchVersion{2, 15};
        EXPECT_EQ(reduce, comm && v210 ? s.num_stages : 0) << what;
        EXPECT_EQ(wait_reduce, comm && v215 ? s.num_stages : 0) << what;
        EXPECT_EQ(wait_send, comm && v215 ? sends : 0) << what;
        EXPECT_EQ(CountCells(*csv, "SEND_F") + CountCells(*csv, "SEND_B"), comm ? sends : 0) << what;
        EXPECT_EQ(CountCells(*csv, "I"), v26 ? Count(s, OpKind::kBackwardInput) : 0) << what;
        EXPECT_EQ(notes.reduce_grads, reduce) << what;
        EXPECT_EQ(notes.waits, wait_reduce + wait_send) << what;
        auto back = ImportTorchCsv(*csv, "x.csv", TorchDialect::kAuto);
        ASSERT_TRUE(back) << what << ": " << back.error().message << "\n" << *csv;
        // Before 2.9 torch has no OVERLAP_F_B: a pair comes back as two ops
        // in turn (where it lowers the comm itself, placed for such ops).
        Schedule expected = s;
        int pairs = 0;
        for (auto& program : expected.programs) {
          for (Op& op : program) {
            pairs += op.paired;
            if (v < TorchVersion{2, 9}) op.paired = false;
          }
        }
        if (v < TorchVersion{2, 9} && compute_only) {
          expected = unpaired;
          ASSERT_TRUE(InsertComm(expected, {}));
        }
        EXPECT_EQ(back->schedule, expected) << what;
        EXPECT_EQ(notes.overlapped, (v >= TorchVersion{2, 9} ? pairs : 0)) << what;
        int cells = 0;
        for (size_t at = csv->find(")OVERLAP_F_B"); at != std::string::npos; at = csv->find(")OVERLAP_F_B", at + 1)) {
          ++cells;
        }
        EXPECT_EQ(cells, notes.overlapped) << what;
        EXPECT_EQ(pairs > 0, name == "dualpipev") << what;
        EXPECT_EQ(back->had_comm, comm) << what;
        EXPECT_EQ(static_cast<int>(back->reduce_grads.size()), reduce) << what;
        auto again = ExportTorchCsv(back->schedule, {.version = v, .compute_only = compute_only});
        ASSERT_TRUE(again);
        EXPECT_EQ(*again, *csv) << what;
      }
    }
  }
}

TEST(TorchCsv, ReplicasAllReduceBecomesReduceGrad) {
  Schedule s = *BuildByName("1f1b", 2, 4);
  s.replicas = 2;
  ASSERT_TRUE(InsertComm(s, {}));
  InsertAllReduce(s, {100, 100});
  TorchExportNotes notes;
  auto csv = ExportTorchCsv(s, {.version = {2, 11}}, &notes);
  ASSERT_TRUE(csv);
  EXPECT_EQ(notes.dropped, 2);  // the two STEPs; the ALLREDUCEs are written as REDUCE_GRAD
  EXPECT_EQ(*csv,
            "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0F2,0SEND_F2,0RECV_B1,0B1,0F3,0SEND_F3,0RECV_B2,0B2,0RECV_B3,"
            "0B3,0REDUCE_GRAD\n"
            "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1RECV_F2,1F2,1B2,1SEND_B2,1RECV_F3,1F3,1B3,"
            "1SEND_B3,1REDUCE_GRAD\n");
  auto older = ExportTorchCsv(s, {.version = {2, 9}}, &notes);
  ASSERT_TRUE(older);
  EXPECT_EQ(notes.dropped, 4);  // no REDUCE_GRAD before 2.10: ALLREDUCE has no action
}

// torch 2.15's wait placement (its _add_wait_send): a forward send's wait
// right after the rank's backward of that (stage, micro-batch); backward
// sends' waits at the row's end; WAIT_REDUCE_GRAD right after REDUCE_GRAD.
// The expected text is what torch 2.15's lowering wrote for this compute
// order (tests/inputs/torch/gpipe_k2_m2_2.15.0.csv) less UNSHARD and RESHARD.
TEST(TorchCsv, Torch215WaitsWhereTorchPutsThem) {
  auto imported = ImportTorchCsv("0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n", "g.csv", TorchDialect::kAuto);
  ASSERT_TRUE(imported);
  const Schedule& s = imported->schedule;
  auto csv = ExportTorchCsv(s, {});
  ASSERT_TRUE(csv);
  EXPECT_EQ(*csv,
            "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1,0REDUCE_GRAD,"
            "0WAIT_REDUCE_GRAD\n"
            "1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,1WAIT_SEND_B0,"
            "1WAIT_SEND_B1\n");
  auto compute = ExportTorchCsv(s, {.compute_only = true});
  ASSERT_TRUE(compute);
  EXPECT_EQ(*compute, "0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n");
}

TEST(TorchCsv, Torch25FormOrRefusal) {
  // Two stages per device on a loop placement: what torch 2.5.1's runtime
  // runs (scripts/torch_roundtrip.py trained it to the unpipelined gradients).
  Schedule full = *BuildByName("interleaved", 2, 2);
  ASSERT_TRUE(InsertComm(full, {}));
  TorchExportNotes notes;
  auto csv = ExportTorchCsv(full, {.version = {2, 5}}, &notes);
  ASSERT_TRUE(csv);
  EXPECT_EQ(*csv,
            "0F0,0SEND_F0,0F1,0SEND_F1,2RECV_F0,2F0,2SEND_F0,2RECV_F1,2F1,2SEND_F1,2RECV_B0,2B0,2SEND_B0,2RECV_B1,"
            "2B1,2SEND_B1,0RECV_B0,0B0,0RECV_B1,0B1\n"
            "1RECV_F0,1F0,1SEND_F0,1RECV_F1,1F1,1SEND_F1,3RECV_F0,3F0,3B0,3SEND_B0,3RECV_F1,3F1,3B1,3SEND_B1,"
            "1RECV_B0,1B0,1SEND_B0,1RECV_B1,1B1,1SEND_B1\n");
  ASSERT_EQ(notes.warnings.size(), 1u);
  EXPECT_THAT(notes.warnings[0], ::testing::HasSubstr("does not scale gradients"));
  auto compute = ExportTorchCsv(full, {.version = {2, 5}, .compute_only = true});
  ASSERT_FALSE(compute);
  EXPECT_THAT(compute.error().message, ::testing::HasSubstr("compute-only loader needs a W for every stage"));
  // Split backward on the same placement: B stands for I.
  auto split_imported = ImportTorchCsv("0F0,2F0,2I0,2W0,0I0,0W0\n1F0,3F0,3I0,3W0,1I0,1W0\n", "split.csv",
                                       TorchDialect::kAuto);
  ASSERT_TRUE(split_imported) << split_imported.error().message;
  auto split = ExportTorchCsv(split_imported->schedule, {.version = {2, 5}, .compute_only = true}, &notes);
  ASSERT_TRUE(split) << split.error().message;
  EXPECT_EQ(*split, "0F0,2F0,2B0,2W0,0B0,0W0\n1F0,3F0,3B0,3W0,1B0,1W0\n");
  EXPECT_THAT(notes.warnings.back(), ::testing::HasSubstr("use_full_backward=False"));
  // What 2.5.1's runtime cannot run: one stage on a rank, two adjacent stages on one rank.
  Schedule one = *BuildByName("1f1b", 2, 2);
  ASSERT_TRUE(InsertComm(one, {}));
  auto single = ExportTorchCsv(one, {.version = {2, 5}});
  ASSERT_FALSE(single);
  EXPECT_THAT(single.error().message, ::testing::HasSubstr("two or more stages per rank"));
  EXPECT_THAT(single.error().message, ::testing::HasSubstr("device 0 holds one (stage 0)"));
  ASSERT_TRUE(ExportTorchCsv(one, {.version = {2, 6}}));
  Schedule v = *BuildByName("zb-v", 2, 4);
  ASSERT_TRUE(InsertComm(v, {}));
  auto v_shape = ExportTorchCsv(v, {.version = {2, 5}});
  ASSERT_FALSE(v_shape);
  EXPECT_THAT(v_shape.error().message, ::testing::HasSubstr("stages 1 and 2 are both on device 1"));
  // 2.7 to 2.9 scale a stage only after a full backward.
  Schedule zb = *BuildByName("zb-h1", 2, 2);
  ASSERT_TRUE(InsertComm(zb, {}));
  notes = {};
  ASSERT_TRUE(ExportTorchCsv(zb, {.version = {2, 8}}, &notes));
  ASSERT_EQ(notes.warnings.size(), 1u);
  EXPECT_THAT(notes.warnings[0], ::testing::HasSubstr("stages 0, 1 (I/W) stay unscaled"));
}

TEST(TorchCsv, TorchVersions) {
  EXPECT_EQ(*ParseTorchVersion("2.15"), (TorchVersion{2, 15}));
  EXPECT_EQ(*ParseTorchVersion("2.14.1"), (TorchVersion{2, 14}));
  EXPECT_EQ(*ParseTorchVersion("2.5"), kOldestTorch);
  EXPECT_EQ(ParseTorchVersion("2.4").error().message,
            "torch version '2.4': twinpipe writes the schedule CSVs of torch 2.5 to 2.15");
  EXPECT_EQ(ParseTorchVersion("2.16").error().message,
            "torch version '2.16': twinpipe writes the schedule CSVs of torch 2.5 to 2.15");
  EXPECT_EQ(ParseTorchVersion("two").error().message, "torch version 'two': expected X.Y such as 2.15 (or X.Y.Z)");
  EXPECT_FALSE(ParseTorchVersion("2."));
  EXPECT_FALSE(ParseTorchVersion("2.15.x"));
}

// Files in each release's vocabulary, written by that release's own lowering
// (tests/inputs/torch/README.md): every action read, the bookkeeping counted,
// the schedule verified, and where the compute order is twinpipe's, equal to
// the schedule twinpipe builds (comm placed as torch placed it).
TEST(TorchCsv, EveryReleaseFixture) {
  struct Case {
    std::string file;
    std::array<int, kNumTorchBookkeeping> bookkeeping;  // UNSHARD RESHARD REDUCE_GRAD WAIT_REDUCE_GRAD WAIT_SEND_F/B
    int overlapped;
  };
  const std::vector<Case> cases = {
      {"gpipe_k2_m2_2.5.1.csv", {2, 0, 0, 0, 0, 0}, 0},       {"gpipe_k2_m2_2.6.0.csv", {2, 0, 0, 0, 0, 0}, 0},
      {"gpipe_k2_m2_2.9.1.csv", {2, 0, 0, 0, 0, 0}, 0},       {"gpipe_k2_m2_2.11.0.csv", {2, 2, 2, 0, 0, 0}, 0},
      {"gpipe_k2_m2_2.14.1.csv", {2, 2, 2, 0, 0, 0}, 0},      {"gpipe_k2_m2_2.15.0.csv", {2, 2, 2, 2, 2, 2}, 0},
      {"1f1b_k2_m4_2.5.1.csv", {2, 0, 0, 0, 0, 0}, 0},        {"1f1b_k2_m4_2.15.0.csv", {2, 2, 2, 2, 4, 4}, 0},
      {"zb-h1_k2_m4_2.5.1.csv", {2, 0, 0, 0, 0, 0}, 0},       {"zb-h1_k2_m4_2.6.0.csv", {2, 0, 0, 0, 0, 0}, 0},
      {"zb-h1_k2_m4_2.9.1.csv", {2, 0, 0, 0, 0, 0}, 0},       {"zb-h1_k2_m4_2.11.0.csv", {2, 2, 2, 0, 0, 0}, 0},
      {"zb-h1_k2_m4_2.14.1.csv", {2, 2, 2, 0, 0, 0}, 0},      {"zb-h1_k2_m4_2.15.0.csv", {2, 2, 2, 2, 4, 4}, 0},
      {"interleaved_k2_m4_2.15.0.csv", {4, 4, 4, 4, 12, 12}, 0},
      {"zb-v_k2_m4_2.15.0.csv", {4, 4, 4, 4, 8, 8}, 0},
      {"dualpipev_k4_m10_2.9.1.csv", {8, 4, 0, 0, 0, 0}, 0},
      {"dualpipev_k4_m10_2.11.0.csv", {8, 8, 8, 0, 0, 0}, 41},
      {"dualpipev_k4_m10_2.15.0.csv", {8, 8, 8, 8, 60, 60}, 41},
      {"gpipe_order_k2_m2_2.11.0.csv", {0, 0, 2, 0, 0, 0}, 0},
      {"gpipe_order_k2_m2_2.15.0.csv", {0, 0, 2, 2, 0, 0}, 0},
  };
  for (const Case& c : cases) {
    std::ifstream in(std::string(TWINPIPE_SOURCE_DIR) + "/tests/inputs/torch/" + c.file);
    ASSERT_TRUE(in) << c.file;
    std::stringstream text;
    text << in.rdbuf();
    auto r = ImportTorchCsv(text.str(), c.file, TorchDialect::kAuto);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->bookkeeping, c.bookkeeping) << c.file;
    EXPECT_EQ(r->overlapped, c.overlapped) << c.file;
    EXPECT_EQ(static_cast<int>(r->reduce_grads.size()), c.bookkeeping[2]) << c.file;
    EXPECT_EQ(r->had_comm, c.file.find("order") == std::string::npos) << c.file;
    auto d = Verify(r->schedule);
    EXPECT_TRUE(d.empty()) << c.file << ": " << FormatDiagnostic(r->schedule, d[0]);
    // 2.5.1's files read alike with the older dialect forced: its B is an
    // input backward where a W follows it, the full one alone.
    if (c.file.ends_with("_2.5.1.csv")) {
      auto older = ImportTorchCsv(text.str(), c.file, TorchDialect::kOlder);
      ASSERT_TRUE(older) << older.error().message;
      EXPECT_EQ(older->schedule, r->schedule) << c.file;
    }
    // twinpipe's compute order: the same compute ops, device by device.
    for (std::string name : {"1f1b", "zb-h1", "interleaved", "zb-v"}) {
      if (c.file.rfind(name + "_k2_m4", 0) != 0) continue;
      auto built = BuildByName(name, 2, 4);
      ASSERT_TRUE(built);
      for (size_t dev = 0; dev < built->programs.size(); ++dev) {
        std::vector<Op> a, b;
        for (const Op& op : built->programs[dev]) if (!IsComm(op.kind)) a.push_back({.kind = op.kind, .stage = op.stage, .micro_batch = op.micro_batch});
        for (const Op& op : r->schedule.programs[dev]) if (!IsComm(op.kind)) b.push_back({.kind = op.kind, .stage = op.stage, .micro_batch = op.micro_batch});
        EXPECT_EQ(a, b) << c.file << " device " << dev;
      }
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
  // Forced older, B is the input backward where its W follows (torch 2.5's
  // zero-bubble schedules) and the full backward alone (its others).
  auto older = ImportTorchCsv("0F0,0B0\n", "c.csv", TorchDialect::kOlder);
  ASSERT_TRUE(older);
  EXPECT_EQ(older->schedule.programs[0][1].kind, OpKind::kBackward);
  auto split = ImportTorchCsv("0F0,0F1,0B0,0B1,0W0\n", "d.csv", TorchDialect::kOlder);
  ASSERT_TRUE(split);
  EXPECT_EQ(split->schedule.programs[0][2].kind, OpKind::kBackwardInput);
  EXPECT_EQ(split->schedule.programs[0][3].kind, OpKind::kBackward);
  EXPECT_EQ(split->schedule.programs[0][4].kind, OpKind::kBackwardWeight);
}

TEST(TorchCsv, BadCellsNameLineAndCell) {
  auto r = ImportTorchCsv("0F0,0F1\n1F0,1Q0\n", "bad.csv", TorchDialect::kAuto);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "bad.csv:2: cell 2: '1Q0': Q is not an action torch writes (F, I, W, B, BW, (;)OVERLAP_F_B, SEND_F, "
            "RECV_F, SEND_B, RECV_B, WAIT_SEND_F, WAIT_SEND_B, UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD)");
  auto foo = ImportTorchCsv("0F0,0FOO3\n", "foo.csv", TorchDialect::kAuto);
  ASSERT_FALSE(foo);
  EXPECT_THAT(foo.error().message, ::testing::StartsWith("foo.csv:1: cell 2: '0FOO3': FOO is not an action torch "
                                                         "writes (F, I, W, B,"));
  auto o = ImportTorchCsv("(0F0;0B0\n", "o.csv", TorchDialect::kAuto);
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().message, "o.csv:1: cell 1: '(0F0;0B0': expected (<forward>;<backward>)OVERLAP_F_B");
  auto x = ImportTorchCsv("0F0,F1\n", "x.csv", TorchDialect::kAuto);
  ASSERT_FALSE(x);
  EXPECT_EQ(x.error().message,
            "x.csv:1: cell 2: 'F1': expected <stage><ACTION><micro-batch> such as 0F0 or 2SEND_B3 (or "
            "<stage><ACTION> such as 0UNSHARD)");
  auto no_mb = ImportTorchCsv("0F0,0B\n", "m.csv", TorchDialect::kAuto);
  ASSERT_FALSE(no_mb);
  EXPECT_EQ(no_mb.error().message, "m.csv:1: cell 2: '0B': B needs a micro-batch, as in 0B0");
  auto mb = ImportTorchCsv("0UNSHARD0,0F0,0B0\n", "u.csv", TorchDialect::kAuto);
  ASSERT_FALSE(mb);
  EXPECT_EQ(mb.error().message, "u.csv:1: cell 1: '0UNSHARD0': torch writes UNSHARD without a micro-batch, as in 0UNSHARD");
  auto overlap = ImportTorchCsv("(0F0;0UNSHARD)OVERLAP_F_B\n", "v.csv", TorchDialect::kAuto);
  ASSERT_FALSE(overlap);
  EXPECT_EQ(overlap.error().message,
            "v.csv:1: cell 1: '(0F0;0UNSHARD)OVERLAP_F_B': OVERLAP_F_B overlaps compute actions; UNSHARD is not one");
}

// torch's bookkeeping actions are read, counted and checked.
TEST(TorchCsv, BookkeepingIsCountedAndChecked) {
  // torch 2.15's GPipe order, K = 2, M = 2, lowered by its runtime.
  const std::string csv =
      "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1,0REDUCE_GRAD,"
      "0WAIT_REDUCE_GRAD,0RESHARD\n"
      "1UNSHARD,1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,1RESHARD,"
      "1WAIT_SEND_B0,1WAIT_SEND_B1\n";
  auto r = ImportTorchCsv(csv, "g.csv", TorchDialect::kAuto);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->had_comm);
  EXPECT_EQ(r->bookkeeping, (std::array<int, kNumTorchBookkeeping>{2, 2, 2, 2, 2, 2}));
  ASSERT_EQ(r->reduce_grads.size(), 2u);
  EXPECT_EQ(r->reduce_grads[1].device, 1);
  EXPECT_EQ(r->reduce_grads[1].column, 10);
  EXPECT_TRUE(Verify(r->schedule).empty());
  auto fail = [](std::string text) {
    auto x = ImportTorchCsv(text, "f.csv", TorchDialect::kAuto);
    return x ? std::string("accepted") : x.error().message;
  };
  auto edit = [&](std::string from, std::string to) {
    std::string t = csv;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  EXPECT_EQ(fail(edit("0RECV_B1,0B1,0WAIT_SEND_F1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD",
                      "0REDUCE_GRAD,0WAIT_REDUCE_GRAD,0RECV_B1,0B1,0WAIT_SEND_F1")),
            "f.csv:1: cell 9: 0REDUCE_GRAD comes before 0B1 (cell 12): torch would reduce and scale stage 0's "
            "gradients before all of its backward");
  EXPECT_EQ(fail(edit("1RESHARD", "1RESHARD,1REDUCE_GRAD,1WAIT_REDUCE_GRAD")),
            "f.csv:2: cell 13: a second REDUCE_GRAD for stage 1 (the first at line 2, cell 10): torch would scale its "
            "gradients twice");
  EXPECT_EQ(fail(edit("0WAIT_SEND_F0,", "")),
            "f.csv:1: cell 3: 0SEND_F0 has no WAIT_SEND_F after it (the file has waits, torch 2.15's form, which "
            "needs one per send)");
  EXPECT_EQ(fail(edit("0F0,0SEND_F0", "0F0,0WAIT_SEND_F0,0SEND_F0")),
            "f.csv:1: cell 3: 0WAIT_SEND_F0 waits for 0SEND_F0, which rank 0 has not sent before it");
  EXPECT_EQ(fail(edit("0REDUCE_GRAD,0WAIT_REDUCE_GRAD", "0WAIT_REDUCE_GRAD,0REDUCE_GRAD")),
            "f.csv:1: cell 12: 0WAIT_REDUCE_GRAD without a pending 0REDUCE_GRAD on rank 0");
  EXPECT_EQ(fail(edit("1REDUCE_GRAD,1WAIT_REDUCE_GRAD", "0REDUCE_GRAD,0WAIT_REDUCE_GRAD")),
            "f.csv:2: cell 10: 0REDUCE_GRAD on rank 1, which does not compute stage 0");
  // torch 2.10 to 2.14 write no waits; a REDUCE_GRAD must still cover every stage.
  const std::string v211 = "0F0,0SEND_F0,0RECV_B0,0B0,0REDUCE_GRAD\n1RECV_F0,1F0,1B0,1SEND_B0\n";
  EXPECT_EQ(fail(v211), "f.csv: REDUCE_GRAD for 1 of 2 stages, none for stage 1: torch would scale only some "
                        "stages' gradients");
}
}  // namespace
}  // namespace twinpipe::ir
