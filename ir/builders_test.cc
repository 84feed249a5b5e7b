#include "ir/builders.h"

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <tuple>

#include <fmt/format.h>

#include "ir/json_format.h"
#include "ir/passes.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

namespace twinpipe::ir {
namespace {

std::array<int64_t, kNumOpKinds> Counts(const Schedule& s) {
  std::array<int64_t, kNumOpKinds> c{};
  for (const auto& p : s.programs) {
    for (const Op& op : p) ++c[static_cast<int>(op.kind)];
  }
  return c;
}


// Most forwards on the device whose activations are not yet freed (by B or W).
int MaxInFlight(const std::vector<Op>& program) {
  int in_flight = 0, most = 0;
  for (const Op& op : program) {
    if (op.kind == OpKind::kForward) most = std::max(most, ++in_flight);
    if (op.kind == OpKind::kBackward || op.kind == OpKind::kBackwardWeight) --in_flight;
  }
  return most;
}

// `auto` for a random problem, seeded by (K, M).
Result<Schedule> BuildRandomAuto(int32_t K, int32_t M) {
  return BuildAuto(RandomAutoProblem(K, M, static_cast<uint32_t>(K * 1000 + M)));
}

}  // namespace

// Short names for ctest's list of parameterised cases.
void PrintTo(RecomputeMode mode, std::ostream* os) { *os << RecomputeModeName(mode); }

namespace {

class EveryBuilder : public ::testing::TestWithParam<std::tuple<std::string, RecomputeMode>> {};

TEST_P(EveryBuilder, VerifiesRoundTripsAndCounts) {
  const auto& [name, mode] = GetParam();
  const bool split = name == "zb-h1" || name == "zb-h2" || name == "zb-v" || name == kAutoSchedule;
  const bool mixed = name == "dualpipev";  // B's and, in its zero-bubble phases, I's with W's
  for (int32_t K = 1; K <= 8; ++K) {
    for (int32_t M = 1; M <= 32; ++M) {
      SCOPED_TRACE(::testing::Message() << name << " K=" << K << " M=" << M);
      auto built = name == kAutoSchedule ? BuildRandomAuto(K, M) : BuildByName(name, K, M);
      if ((name == "interleaved" && M < K) || (name == "dualpipev" && M < 2 * K)) {
        ASSERT_FALSE(built);
        continue;
      }
      ASSERT_TRUE(built) << built.error().message;
      Schedule s = *built;
      const int32_t S = s.num_stages;
      ASSERT_EQ(S, K * DefaultChunks(name));
      ASSERT_EQ(s.num_devices, K);
      InsertRecompute(s, mode);
      ASSERT_TRUE(InsertComm(s, CommBytes{std::vector<int64_t>(S - 1, 1000 + K),
                                          std::vector<int64_t>(S - 1, 2000 + K)}));
      auto diagnostics = Verify(s);
      ASSERT_TRUE(diagnostics.empty()) << FormatDiagnostic(s, diagnostics[0]);

      const std::string text = PrintText(s);
      auto parsed = ParseText(text, "round-trip");
      ASSERT_TRUE(parsed) << parsed.error().message;
      EXPECT_EQ(*parsed, s);
      EXPECT_EQ(PrintText(*parsed), text);
      const std::string json = PrintJson(s);
      auto from_json = ParseJson(json, "round-trip.json");
      ASSERT_TRUE(from_json) << from_json.error().message;
      EXPECT_EQ(*from_json, s);
      EXPECT_EQ(PrintJson(*from_json), json);

      int64_t crossing = 0;  // boundaries between stages on different devices
      for (int32_t b = 0; b + 1 < S; ++b) crossing += s.placement[b] != s.placement[b + 1];
      const int64_t pairs = int64_t{S} * M, boundary = crossing * M;
      const int64_t recomputes = mode == RecomputeMode::kNone ? 0
                                 : mode == RecomputeMode::kFull ? pairs
                                                                : int64_t{S} * (M - 1);
      const auto c = Counts(s);
      EXPECT_EQ(c[static_cast<int>(OpKind::kForward)], pairs);
      const int64_t whole = c[static_cast<int>(OpKind::kBackward)], inputs = c[static_cast<int>(OpKind::kBackwardInput)];
      EXPECT_EQ(whole, split ? 0 : mixed ? pairs - inputs : pairs);
      EXPECT_EQ(inputs, split ? pairs : mixed ? pairs - whole : 0);
      EXPECT_EQ(c[static_cast<int>(OpKind::kBackwardWeight)], inputs);
      if (mixed) {
        EXPECT_GT(inputs, 0);
      }
      EXPECT_EQ(c[static_cast<int>(OpKind::kRecompute)], recomputes);
      for (OpKind k : {OpKind::kSendF, OpKind::kRecvF, OpKind::kSendB, OpKind::kRecvB}) {
        EXPECT_EQ(c[static_cast<int>(k)], boundary) << OpKindName(k);
      }
      EXPECT_EQ(c[static_cast<int>(OpKind::kStep)], K);
      EXPECT_EQ(s.NumOps(), 2 * pairs + inputs + recomputes + 4 * boundary + K);

      // Activations held: the schedules' memory promises.
      for (int32_t st = 0; st < S && !split && !mixed && name != "interleaved"; ++st) {
        const int most = MaxInFlight(s.programs[s.placement[st]]);
        const int expected = name == "1f1b" ? std::min(K - st, M) : name == "gpipe" ? M : 1;
        EXPECT_EQ(most, expected) << "stage " << st;
      }
      if (name == "zb-h1") {  // F done, W not: K micro-batches on every stage (at most M)
        for (int32_t st = 0; st < S; ++st) EXPECT_EQ(MaxInFlight(s.programs[st]), std::min(K, M)) << "stage " << st;
      }
      if (name == "zb-v") {  // 2K chunk activations per device: 1F1B's K whole stages
        for (int32_t d = 0; d < K; ++d) EXPECT_LE(MaxInFlight(s.programs[d]), 2 * K) << "device " << d;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, EveryBuilder,
    ::testing::Combine(::testing::ValuesIn(ScheduleNames()),
                       ::testing::Values(RecomputeMode::kNone, RecomputeMode::kFull,
                                         RecomputeMode::kExceptLast)),
    [](const auto& param_info) {
      std::string n = std::get<0>(param_info.param) + "_" +
                      std::string(RecomputeModeName(std::get<1>(param_info.param)));
      for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return n;
    });

// The compute ops of each device, as "F2.1" (forward, stage 2, micro-batch 1).
std::vector<std::string> ComputeOrder(const Schedule& s, int32_t device) {
  std::vector<std::string> out;
  for (const Op& op : s.programs[device]) {
    if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward) {
      out.push_back(fmt::format("{}{}.{}", op.kind == OpKind::kForward ? 'F' : 'B', op.stage, op.micro_batch));
    }
  }
  return out;
}

// Megatron-Core's group of micro-batches (microbatch_group_size_per_vp_stage):
// the smallest N in [K, M] whose last group, M mod N, is empty or at least
// K, found by trying every N; K itself where K divides M.
TEST(Builders, InterleavedGroupIsTheSmallestMegatronCoreTakes) {
  for (int32_t K = 1; K <= 9; ++K) {
    for (int32_t M = 1; M <= 60; ++M) {
      int32_t smallest = 0;
      for (int32_t n = K; n <= M && smallest == 0; ++n) {
        if (M % n == 0 || M % n >= K) smallest = n;
      }
      EXPECT_EQ(InterleavedGroup(K, M), smallest) << "K=" << K << " M=" << M;
      if (M >= K && M % K == 0) EXPECT_EQ(InterleavedGroup(K, M), K);
    }
  }
  EXPECT_EQ(InterleavedGroup(4, 6), 6);
  EXPECT_EQ(InterleavedGroup(4, 9), 5);    // groups of 5 and 4
  EXPECT_EQ(InterleavedGroup(16, 36), 18);
  EXPECT_EQ(InterleavedGroup(4, 3), 0);
}

// Where K divides M the order is Megatron-LM's (groups of K: virtual
// micro-batch k is micro-batch (k / Kv) K + k mod K through chunk
// (k mod Kv) / K); three micro-batches on two devices of two chunks go as
// Megatron-Core's schedule table orders them with a group of 3, worked by
// hand: device 0 warms up with (2 - 0 - 1) x 2 + (2 - 1) x 3 = 5 forwards,
// device 1 with 3.
TEST(Builders, InterleavedFollowsMegatronCoresScheduleTable) {
  for (int32_t K : {2, 3, 4}) {
    for (int32_t v : {2, 3}) {
      for (int32_t M : {K, 2 * K, 3 * K}) {
        auto s = BuildInterleaved(K, M, v);
        ASSERT_TRUE(s) << s.error().message;
        for (int32_t d = 0; d < K; ++d) {
          std::vector<std::string> expected;
          const int32_t total = M * v, warmup = std::min((K - d - 1) * 2 + (v - 1) * K, total);
          auto name = [&](char kind, int32_t k) {
            const int32_t c = (k % (K * v)) / K, m = (k / (K * v)) * K + k % K;
            return fmt::format("{}{}.{}", kind, (kind == 'F' ? c : v - 1 - c) * K + d, m);
          };
          int32_t f = 0, b = 0;
          for (; f < warmup; ++f) expected.push_back(name('F', f));
          while (f < total) {
            expected.push_back(name('F', f++));
            expected.push_back(name('B', b++));
          }
          while (b < total) expected.push_back(name('B', b++));
          EXPECT_EQ(ComputeOrder(*s, d), expected) << "K=" << K << " M=" << M << " v=" << v << " device " << d;
        }
      }
    }
  }
  auto three = BuildInterleaved(2, 3, 2);
  ASSERT_TRUE(three) << three.error().message;
  EXPECT_EQ(ComputeOrder(*three, 0), (std::vector<std::string>{"F0.0", "F0.1", "F0.2", "F2.0", "F2.1", "F2.2", "B2.0",
                                                               "B2.1", "B2.2", "B0.0", "B0.1", "B0.2"}));
  EXPECT_EQ(ComputeOrder(*three, 1), (std::vector<std::string>{"F1.0", "F1.1", "F1.2", "F3.0", "B3.0", "F3.1", "B3.1",
                                                               "F3.2", "B3.2", "B1.0", "B1.1", "B1.2"}));
  // Megatron-Core's own example (schedules.py: PP 2, N 3, M 5, VP 2): the
  // table runs micro-batches 0 1 2 0 1 2 3 4 3 4 on chunks 0 0 0 1 1 1 0 0 1
  // 1; device 0 warms up with 2 + 3 forwards, device 1 with 3; a short last
  // group of 2 (>= K).
  ASSERT_EQ(InterleavedGroup(2, 5), 3);
  auto five = BuildInterleaved(2, 5, 2);
  ASSERT_TRUE(five) << five.error().message;
  EXPECT_EQ(ComputeOrder(*five, 0),
            (std::vector<std::string>{"F0.0", "F0.1", "F0.2", "F2.0", "F2.1", "F2.2", "B2.0", "F0.3", "B2.1", "F0.4",
                                      "B2.2", "F2.3", "B0.0", "F2.4", "B0.1", "B0.2", "B2.3", "B2.4", "B0.3", "B0.4"}));
  EXPECT_EQ(ComputeOrder(*five, 1),
            (std::vector<std::string>{"F1.0", "F1.1", "F1.2", "F3.0", "B3.0", "F3.1", "B3.1", "F3.2", "B3.2", "F1.3",
                                      "B1.0", "F1.4", "B1.1", "F3.3", "B1.2", "F3.4", "B3.3", "B3.4", "B1.3", "B1.4"}));
  auto few = BuildInterleaved(4, 3, 2);
  ASSERT_FALSE(few);
  EXPECT_EQ(few.error().message,
            "interleaved needs at least as many micro-batches as the 4 devices (Megatron-Core's rule: they pass "
            "through the chunks in groups of K to M), got 3");
}

TEST(Builders, GpipeMatchesFigure2c) {
  // K=2, M=3, comm inserted: the paper's all-forward-then-all-backward shape.
  Schedule s = BuildGpipe(2, 3);
  ASSERT_TRUE(InsertComm(s, {}));
  EXPECT_EQ(PrintText(s),
            "# twinpipe schedule v1\n"
            "stages=2 microbatches=3 devices=2 replicas=1 placement=0,1\n"
            "0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0RECV_B2 0B2 0RECV_B1 0B1 0RECV_B0 0B0 STEP\n"
            "1RECV_F0 1F0 1RECV_F1 1F1 1RECV_F2 1F2 1B2 1SEND_B2 1B1 1SEND_B1 1B0 1SEND_B0 STEP\n");
}

TEST(Builders, OneFOneBWarmUpAndSteadyState) {
  Schedule s = Build1F1B(3, 4);
  auto tokens = [&](int d) {
    std::string out;
    for (const Op& op : s.programs[d]) out += OpToken(op) + " ";
    return out;
  };
  EXPECT_EQ(tokens(0), "0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3 STEP ");
  EXPECT_EQ(tokens(1), "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3 STEP ");
  EXPECT_EQ(tokens(2), "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3 STEP ");
}

TEST(Builders, NaiveRunsOneMicroBatchAtATime) {
  Schedule s = BuildNaive(2, 2);
  EXPECT_EQ(OpToken(s.programs[0][0]), "0F0");
  EXPECT_EQ(OpToken(s.programs[0][1]), "0B0");
  EXPECT_EQ(OpToken(s.programs[0][2]), "0F1");
}

TEST(Builders, RejectsBadArguments) {
  EXPECT_FALSE(BuildByName("gpipe", 0, 4));
  EXPECT_FALSE(BuildByName("gpipe", 4, 0));
  auto unknown = BuildByName("zigzag", 2, 2);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, "unknown schedule 'zigzag': expected one of naive, gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v, dualpipev");
}

// A shape past kMaxScheduleCells is refused before anything is built, for
// every builder; the largest that fits builds.
TEST(Builders, RefusesMoreCellsThanAScheduleHolds) {
  for (const ScheduleBuilder& b : ScheduleBuilders()) {
    const int32_t v = b.default_chunks;
    const auto M = static_cast<int32_t>(kMaxScheduleCells / (64 * v));  // 64 x M x v = the cap exactly
    const auto problem = FindShapeProblem(b.name, 64, M + 64, v);
    ASSERT_TRUE(problem) << b.name;
    EXPECT_EQ(problem->parameter, ShapeParameter::kMicroBatches);  // the larger side
    EXPECT_NE(problem->message.find("a schedule holds at most 4194304"), std::string::npos) << problem->message;
    EXPECT_FALSE(FindShapeProblem(b.name, 64, M, v)) << b.name;
  }
  const auto wide = FindShapeProblem("gpipe", 64 * 1024, 128);  // the devices the larger side
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->parameter, ShapeParameter::kDevices);
  auto huge = BuildByName("1f1b", 4096, 4096);
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().message,
            "4096 devices x 4096 micro-batches x 1 chunks make 16777216 (stage, micro-batch, chunk) cells; a schedule "
            "holds at most 4194304 (about 700 bytes each)");
  EXPECT_FALSE(BuildByName("gpipe", 16777216, 1));
  EXPECT_TRUE(CheckShape("gpipe", 1024, 4096));  // the cap exactly (built, 350 MB of ops: checked only)
}

}  // namespace
// CheckShape says what BuildShape would, without building: the same
// verdict and the same message for every name, K, M and chunk count.
TEST(Builders, CheckShapeAgreesWithBuildShape) {
  int refused = 0;
  for (const std::string& name : ScheduleNames()) {
    for (int32_t K = 0; K <= 5; ++K) {
      for (int32_t M = 0; M <= 11; ++M) {
        for (int32_t v : {0, 1, 2, 3, 4}) {
          const auto check = CheckShape(name, K, M, v);
          const auto built = BuildShape(name, K, M, v);
          ASSERT_EQ(check.has_value(), built.has_value()) << name << " K=" << K << " M=" << M << " v=" << v;
          if (!check) {
            EXPECT_EQ(check.error().message, built.error().message);
            ++refused;
          }
        }
      }
    }
  }
  EXPECT_GT(refused, 0);
}

}  // namespace twinpipe::ir
