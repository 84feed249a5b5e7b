// torch.profiler traces of real torch.distributed.pipelining steps
// (tests/inputs/torch_profile, torch 2.11) read as measured traces of the
// schedules torch ran: the interleaved runs against the programs torch
// dumped, GPipe and 1F1B against twinpipe's own schedules of the same shape.
#include "traces/torch_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ir/builders.h"
#include "ir/passes.h"
#include "ir/torch_csv.h"
#include "traces/compare.h"
#include "traces/schedule_trace.h"

namespace twinpipe::traces {
namespace {

using Files = std::vector<std::pair<std::string, std::string>>;

std::string Read(const std::string& relative) {
  std::ifstream in(std::string(TWINPIPE_SOURCE_DIR) + "/tests/inputs/torch_profile/" + relative, std::ios::binary);
  EXPECT_TRUE(in) << relative;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Files Profiles(const std::string& dir, const std::string& schedule, int ranks) {
  Files files;
  for (int r = 0; r < ranks; ++r) {
    const std::string name = fmt::format("{}/{}.rank{}.json.gz", dir, schedule, r);
    files.emplace_back(name, Read(name));
  }
  return files;
}

int Count(const ir::Schedule& s, bool (*pred)(ir::OpKind)) {
  int n = 0;
  for (const auto& p : s.programs) {
    for (const auto& op : p) n += pred(op.kind) ? 1 : 0;
  }
  return n;
}

// Every action of the program torch dumped is timed but the optimizer STEP
// the reader adds per device (torch steps outside the schedule): 16 F, 16 B,
// 48 transfers over 2 ranks; 64, 64, 224 over 4.
TEST(TorchProfile, InterleavedRunsAreTheProgramsTorchDumped) {
  for (const auto& [dir, ranks] : {std::pair{std::string("w2"), 2}, std::pair{std::string("w4"), 4}}) {
    SCOPED_TRACE(dir);
    auto csv = ir::ImportTorchCsv(Read(dir + "/interleaved.csv"), "interleaved.csv", ir::TorchDialect::kAuto);
    ASSERT_TRUE(csv) << csv.error().message;
    const ir::Schedule& s = csv->schedule;
    auto m = ImportTorchProfiles(Profiles(dir, "interleaved", ranks), s);
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_EQ(m->unmeasured, ranks);  // the STEPs
    EXPECT_EQ(m->measured, s.NumOps() - ranks);
    int bookkeeping = 0;
    for (int n : csv->bookkeeping) bookkeeping += n;
    EXPECT_EQ(m->bookkeeping, bookkeeping);
    EXPECT_FALSE(m->gpu_time);
    EXPECT_EQ(m->trace.source, "torch.profiler");
    EXPECT_EQ(m->trace.devices, ranks);
    EXPECT_EQ(m->trace.placement, s.placement);
    for (const Event& e : m->trace.events) {
      EXPECT_GE(e.start_s, 0);
      if (e.stream == Stream::kCompute) {
        EXPECT_GT(e.end_s, e.start_s) << e.id;
      }
    }
  }
}

// twinpipe's GPipe with its backwards first micro-batch first, as torch's
// ScheduleGPipe runs them (the paper's, and twinpipe's, run the last first).
ir::Schedule TorchGpipe(int stages, int micro) {
  ir::Schedule s = ir::BuildGpipe(stages, micro);
  for (auto& program : s.programs) {
    auto first_b = std::find_if(program.begin(), program.end(),
                                [](const ir::Op& op) { return op.kind == ir::OpKind::kBackward; });
    auto end_b = std::find_if(first_b, program.end(), [](const ir::Op& op) { return op.kind != ir::OpKind::kBackward; });
    std::reverse(first_b, end_b);
  }
  ir::Renumber(s);
  return s;
}

// ScheduleGPipe labels only its compute ("Forward i", "Backward i"), in the
// order of twinpipe's GPipe with the backwards reversed: each device's F and
// B are timed, its transfers and STEP are not; twinpipe's own GPipe is
// refused. (torch 2.11's Schedule1F1B labels nothing: below.)
TEST(TorchProfile, GpipeRunsTimeTheirCompute) {
  for (const auto& [dir, ranks, micro] : {std::tuple{std::string("w2"), 2, 4}, std::tuple{std::string("w4"), 4, 8}}) {
    SCOPED_TRACE(dir);
    ir::Schedule s = TorchGpipe(ranks, micro);
    ASSERT_TRUE(ir::InsertComm(s, {}));
    ir::Schedule paper = ir::BuildGpipe(ranks, micro);
    ASSERT_TRUE(ir::InsertComm(paper, {}));
    EXPECT_FALSE(ImportTorchProfiles(Profiles(dir, "gpipe", ranks), paper));
    auto m = ImportTorchProfiles(Profiles(dir, "gpipe", ranks), s);
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_EQ(m->measured, 2 * micro * ranks);
    EXPECT_EQ(m->unmeasured, Count(s, ir::IsComm) + ranks);
    // On each device the compute starts in program order (ids ascending).
    std::vector<double> last(ranks, -1);
    for (const Event& e : m->trace.events) {
      EXPECT_GE(e.start_s, last[e.device]) << e.id;
      last[e.device] = e.end_s;
    }
    // A prediction of the same schedule compares on those ops.
    Trace predicted = TraceFor(s, "simulate");
    for (Event& e : predicted.events) {
      e.start_s = e.id * 1e-3;
      e.end_s = e.start_s + 1e-3;
    }
    auto c = Compare(predicted, m->trace);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->ops_compared, m->measured);
    EXPECT_EQ(c->ops_predicted, static_cast<int>(s.NumOps()));
    EXPECT_FALSE(c->memory_measured);
    EXPECT_NE(ComparisonTable(*c).find(fmt::format("ops compared {} of the {}", m->measured, s.NumOps())),
              std::string::npos);
    // Partial, written and read back whatever its source says: a saved
    // import compares alike; a whole trace of fewer ops is refused.
    EXPECT_TRUE(m->trace.partial);
    Trace saved = *ReadTraceJson(WriteTraceJson(m->trace), "m.json");
    EXPECT_TRUE(saved.partial);
    saved.source = "execute:cuda";
    auto again = Compare(predicted, saved);
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(again->ops_compared, m->measured);
    saved.partial = false;
    EXPECT_FALSE(Compare(predicted, saved));
    EXPECT_EQ(WriteTraceJson(predicted).find("partial"), std::string::npos);
  }
}

// torch 2.11's Schedule1F1B runs its micro-batches without record_function
// (schedules.py labels ScheduleGPipe's and the multi-stage runtime's
// actions only): nothing to time, and the message says what is read.
TEST(TorchProfile, AnUnlabelledProfileSaysWhatIsRead) {
  ir::Schedule s = *ir::BuildByName("1f1b", 2, 4);
  ASSERT_TRUE(ir::InsertComm(s, {}));
  auto m = ImportTorchProfiles(Profiles("w2", "1f1b", 2), s);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message, "w2/1f1b.rank0.json.gz: no op of the schedule's program for rank 0 is labelled (torch.distributed."
                               "pipelining labels its actions 'PP:<action>' or 'Forward <i>' / 'Backward <i>' in "
                               "user_annotation events)");
}

// GPipe's profile is not 1F1B's: the first forward after a backward on
// rank 0 tells them apart.
TEST(TorchProfile, AProfileOfAnotherScheduleIsRefused) {
  ir::Schedule s = *ir::BuildByName("1f1b", 2, 4);  // the same ops as GPipe's, in another order
  ASSERT_TRUE(ir::InsertComm(s, {}));
  auto m = ImportTorchProfiles(Profiles("w2", "gpipe", 2), s);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("the profile is of another schedule"), std::string::npos) << m.error().message;
}

// The op's time where the profile has the GPU's work: the span of the kernels
// launched, from any thread, while its label was open on the host. Closed
// form on a made-up profile: Forward 0 is open over [0, 10] us and launches
// a kernel at 5 that runs [15, 19], after the label closed; Backward 0 is
// open over [20, 40] and its kernel, launched at 25 from another thread
// (autograd's), runs [30, 80]; a memset launched at 45, between labels (the
// optimizer), is no op's though it runs inside B's window. So F runs [0, 4]
// us and B [15, 65] after the first op's start.
TEST(TorchProfile, GpuTimeIsTheSpanOfTheWorkEachLabelLaunched) {
  ir::Schedule s = TorchGpipe(1, 1);
  ASSERT_TRUE(ir::InsertComm(s, {}));
  auto ev = [](const std::string& cat, double ts, double dur, int tid, const std::string& extra) {
    return fmt::format(R"({{"ph": "X", "cat": "{}", "ts": {}, "dur": {}, "tid": {}{}}})", cat, ts, dur, tid, extra);
  };
  auto corr = [](int c) { return fmt::format(R"(, "name": "k", "args": {{"correlation": {}}})", c); };
  // Forward 0 open over [1000, 1010] us, Backward 0 over [1020, 1040].
  const std::string both = ev("user_annotation", 1000, 10, 1, R"(, "name": "Forward 0")") + "," +
                           ev("user_annotation", 1020, 20, 1, R"(, "name": "Backward 0")");
  auto import = [&](const std::string& events) {
    return ImportTorchProfiles({{"g.json", R"({"traceEvents": [)" + events + "]}"}}, s);
  };
  const std::string events =
      both + "," + ev("cuda_runtime", 1005, 1, 1, corr(1)) + "," + ev("kernel", 1015, 4, 7, corr(1)) + "," +
      ev("cuda_runtime", 1025, 1, 2, corr(2)) + "," + ev("kernel", 1030, 50, 7, corr(2)) + "," +
      ev("cuda_driver", 1045, 1, 1, corr(3)) + "," + ev("gpu_memset", 1032, 90, 7, corr(3));
  auto m = import(events);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_TRUE(m->gpu_time);
  EXPECT_EQ(m->no_gpu_work, 0);
  ASSERT_EQ(m->measured, 2);
  EXPECT_DOUBLE_EQ(m->trace.events[0].start_s, 0);
  EXPECT_DOUBLE_EQ(m->trace.events[0].end_s, 4e-6);
  EXPECT_DOUBLE_EQ(m->trace.events[1].start_s, 15e-6);
  EXPECT_DOUBLE_EQ(m->trace.events[1].end_s, 65e-6);
  // GPU work and no label: nothing is labelled, said so (no crash); work no
  // label launched leaves the host's times, and says CPU time.
  m = import(ev("kernel", 0, 0, 7, corr(1)));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("g.json: no op of the schedule's program for rank 0 (by its place among the profiles: it has no "
                                          "/distributedInfo/rank) is labelled"), std::string::npos)
      << m.error().message;
  const std::string stray = both + "," + ev("cuda_runtime", 1015, 1, 1, corr(1)) + "," +
                            ev("kernel", 1016, 4, 7, corr(1));
  m = import(stray);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_FALSE(m->gpu_time);
  EXPECT_DOUBLE_EQ(m->trace.events[0].end_s, 10e-6);
  // A compute action without its label: the profile is not of the whole
  // step (torch labels every one), refused rather than read as partial.
  m = import(ev("user_annotation", 1000, 10, 1, R"(, "name": "Forward 0")"));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(m.error().message.find("g.json: rank 0 (by its place among the profiles: it has no /distributedInfo/rank) has no "
                                          "event labelled for its 0B0"), std::string::npos)
      << m.error().message;
  // A label that launched nothing takes no time where the op before it
  // ended on the GPU, or keeps its host range where it is the first; bad
  // GPU events name their path.
  const std::string idle =
      both + "," + ev("cuda_runtime", 1025, 1, 2, corr(2)) + "," + ev("kernel", 1030, 50, 7, corr(2));
  m = import(idle);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->no_gpu_work, 1);
  EXPECT_DOUBLE_EQ(m->trace.events[0].start_s, 0);
  EXPECT_DOUBLE_EQ(m->trace.events[0].end_s, 10e-6);
  EXPECT_DOUBLE_EQ(m->trace.events[1].start_s, 30e-6);
  m = import(both + "," + ev("cuda_runtime", 1005, 1, 1, corr(1)) + "," + ev("kernel", 1008, 4, 7, corr(1)));
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->no_gpu_work, 1);
  EXPECT_DOUBLE_EQ(m->trace.events[1].start_s, 4e-6);
  EXPECT_DOUBLE_EQ(m->trace.events[1].end_s, 4e-6);
  const std::string bad = idle + R"(, {"ph": "X", "cat": "kernel", "ts": 1, "dur": "x", "args": {"correlation": 9}})";
  m = import(bad);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message, "g.json: /traceEvents/4/dur: expected a number of microseconds from 0 to 1e15");
}

// torch.distributed.pipelining on one H100 (tests/inputs/torch_profile/h100:
// one rank, two stages of 2 x (Linear 2048 -> 2048, ReLU) in fp32, 4
// micro-batches of 1,024 rows). Every compute action is timed on the GPU,
// the backwards too, whose kernels autograd launches from its own thread
// (torch's gpu_user_annotation ranges hold none of them); one stream runs
// them one after another; and a backward costs what its GEMMs say: the
// first stage's input needs no gradient, so its backward runs 3 GEMMs to
// the forward's 2 (1.5x; the last stage's 4, 2x), within 1.3x-2.6x.
TEST(TorchProfile, GpuProfilesOfOneH100TimeEveryComputeAction) {
  for (const std::string name : {"interleaved", "zbv"}) {
    SCOPED_TRACE(name);
    auto csv = ir::ImportTorchCsv(Read("h100/" + name + ".csv"), name + ".csv", ir::TorchDialect::kAuto);
    ASSERT_TRUE(csv) << csv.error().message;
    const ir::Schedule& s = csv->schedule;
    auto m = ImportTorchProfiles(Profiles("h100", name, 1), s);
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_TRUE(m->gpu_time);
    EXPECT_EQ(m->measured, s.NumOps() - 1);  // all but the STEP
    // ZB: the first stage's input gradient (I) is nothing to compute; its W does the whole backward.
    EXPECT_EQ(m->no_gpu_work, name == "zbv" ? 4 : 0);
    std::vector<double> forward;
    for (const Event& e : m->trace.events) {
      if (e.kind == ir::OpKind::kForward && e.stage == 0) forward.push_back(e.end_s - e.start_s);
    }
    std::sort(forward.begin(), forward.end());
    ASSERT_EQ(forward.size(), 4u);
    const double f = (forward[1] + forward[2]) / 2;
    double last_end = 0;
    int backward = 0;
    for (const Event& e : m->trace.events) {
      EXPECT_GE(e.start_s, last_end - 1e-9) << e.id;  // one stream
      last_end = e.end_s;
      if (e.kind == ir::OpKind::kBackwardInput && e.stage == 0) {
        EXPECT_EQ(e.end_s, e.start_s) << e.id;
      }
      const bool whole = e.kind == ir::OpKind::kBackward || (e.kind == ir::OpKind::kBackwardWeight && e.stage == 0);
      if (whole && e.stage == 0) {
        ++backward;
        EXPECT_GT((e.end_s - e.start_s) / f, 1.3) << e.id;
        EXPECT_LT((e.end_s - e.start_s) / f, 2.6) << e.id;
      }
    }
    EXPECT_EQ(backward, 4);
  }
  // ScheduleGPipe and one stage: Forward i / Backward i, timed on the GPU.
  ir::Schedule s = TorchGpipe(1, 4);
  ASSERT_TRUE(ir::InsertComm(s, {}));
  auto m = ImportTorchProfiles(Profiles("h100", "gpipe", 1), s);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_TRUE(m->gpu_time);
  EXPECT_EQ(m->measured, 8);
  EXPECT_EQ(m->no_gpu_work, 0);
}

TEST(TorchProfile, BadProfilesNameTheFileAndPath) {
  ir::Schedule s = *ir::BuildByName("gpipe", 2, 4);
  ASSERT_TRUE(ir::InsertComm(s, {}));
  const Files good = Profiles("w2", "gpipe", 2);
  auto error = [&](Files files) {
    auto m = ImportTorchProfiles(files, s);
    return m ? std::string("(imported)") : m.error().message;
  };
  EXPECT_EQ(error({good[0]}), "1 profiles for a schedule of 2 devices: give one per rank");
  EXPECT_EQ(error({good[0], {"b.json", "{nope"}}).substr(0, 19), "b.json: not JSON ([");
  EXPECT_EQ(error({good[0], {"b.json", R"({"events": []})"}}),
            "b.json: /traceEvents: expected torch.profiler's Chrome trace (an object with an array traceEvents, as "
            "export_chrome_trace writes)");
  EXPECT_EQ(error({good[0], good[0]}), "w2/gpipe.rank0.json.gz: rank 0 again (also w2/gpipe.rank0.json.gz): give one "
                                       "profile per rank");
  EXPECT_EQ(error({good[0], {"b.json.gz", std::string("\x1f\x8b\x08\x00", 4)}}).substr(0, 36),
            "b.json.gz: not a whole gzip stream (");
  auto rank1 = [](const std::string& events) {
    return std::pair<std::string, std::string>{
        "r1.json", R"({"distributedInfo": {"rank": 1}, "traceEvents": [)" + events + "]}"};
  };
  const std::string f0 = R"({"ph": "X", "cat": "user_annotation", "name": "Forward 0", "ts": 10, "dur": 5})";
  EXPECT_EQ(error({good[0], rank1(f0 + "," + f0)}),
            "r1.json: /traceEvents/1/name: 'Forward 0' again (first at /traceEvents/0): the profile holds more than "
            "one step; profile one");
  EXPECT_EQ(error({good[0], rank1(R"({"ph": "X", "cat": "user_annotation", "name": "PP:1F9", "ts": 1, "dur": 1})")}),
            "r1.json: /traceEvents/0/name: 'PP:1F9' (1F9) is no op of the schedule's program for rank 1");
  EXPECT_EQ(error({good[0], rank1(R"({"ph": "X", "cat": "user_annotation", "name": "PP:1Q0", "ts": 1, "dur": 1})")})
                .substr(0, 40),
            "r1.json: /traceEvents/0/name: '1Q0': Q i");
  EXPECT_EQ(error({good[0], rank1(R"({"ph": "X", "cat": "user_annotation", "name": "Forward 0", "ts": "x"})")}),
            "r1.json: /traceEvents/0/ts: expected a number of microseconds");
  EXPECT_EQ(error({good[0], rank1(R"({"ph": "X", "cat": "user_annotation", "name": "Forward 0", "ts": 1, "dur": -2})")}),
            "r1.json: /traceEvents/0/dur: expected a number of microseconds from 0 to 1e15");
  EXPECT_EQ(error({good[0], {"r.json", R"({"distributedInfo": {"rank": 7}, "traceEvents": []})"}}),
            "r.json: /distributedInfo/rank: expected a rank from 0 to 1, got 7");
}

}  // namespace
}  // namespace twinpipe::traces
