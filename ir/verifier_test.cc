#include "ir/verifier.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/builders.h"
#include "ir/dependencies.h"
#include "ir/pipeline.h"
#include "ir/passes.h"
#include "ir/text_format.h"

namespace twinpipe::ir {
namespace {

namespace fs = std::filesystem;

// Each fixture in ir/testdata/verify/ is a schedule in text form whose first
// line is "# expect: <diagnostic>"; the verifier must report exactly that line
// among its diagnostics.
TEST(VerifierFixtures, EachReportsItsExpectedDiagnostic) {
  const fs::path dir = fs::path(TWINPIPE_SOURCE_DIR) / "ir/testdata/verify";
  int fixtures = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    const std::string prefix = "# expect: ";
    ASSERT_EQ(text.rfind(prefix, 0), 0u) << entry.path() << " has no '# expect:' line";
    const std::string expected = text.substr(prefix.size(), text.find('\n') - prefix.size());
    auto schedule = ParseText(text, entry.path().string());
    ASSERT_TRUE(schedule) << schedule.error().message;
    std::vector<std::string> got;
    for (const auto& d : Verify(*schedule)) got.push_back(FormatDiagnostic(*schedule, d));
    bool found = false;
    for (const auto& g : got) found = found || g == expected;
    std::string all;
    for (const auto& g : got) all += "\n  " + g;
    EXPECT_TRUE(found) << entry.path().filename() << ": expected\n  " << expected << "\ngot" << all;
    ++fixtures;
  }
  EXPECT_GE(fixtures, 33);
}

TEST(Verifier, AcceptsAValidSchedule) {
  Schedule s = Build1F1B(4, 8);
  InsertRecompute(s, RecomputeMode::kFull);
  ASSERT_TRUE(InsertComm(s, {}));
  EXPECT_TRUE(Verify(s).empty());
}

TEST(Verifier, RefusesIdsThatAreNotCanonical) {
  Schedule s = BuildGpipe(1, 2);
  s.programs[0][1].id = 0;
  auto d = Verify(s);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(FormatDiagnostic(s, d[0]),
            "device 0, position 1 (0F1): op id 0, expected 1 (ids are 0..N-1 in program order; see Renumber)");
  // Unique but out of range: consumers index arrays by id.
  s = BuildGpipe(1, 2);
  s.programs[0][1].id = 50000000;
  d = Verify(s);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].position, 1);
  Renumber(s);
  EXPECT_TRUE(Verify(s).empty());
}

TEST(Verifier, ReportsAWrongPeer) {
  Schedule s = BuildGpipe(3, 1);
  ASSERT_TRUE(InsertComm(s, {}));
  s.programs[0][1].peer = 2;  // 0SEND_F0 should go to device 1
  auto d = Verify(s);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(FormatDiagnostic(s, d[0]),
            "device 0, position 1 (0SEND_F0): peer is device 2, but stage 1 is placed on device 1");
}

TEST(Verifier, ReportsShapeErrorsWithoutLookingAtOps) {
  Schedule s = BuildGpipe(2, 2);
  s.placement = {0, 5};
  auto d = Verify(s);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].message, "stage 1 is placed on device 5, expected 0..1");
}


// The verifier's order rules and ir::Dependencies state the same thing twice
// (one as readable checks with their diagnostics, one as what the engines
// wait for): held together here. In every builder's schedule each op's
// dependencies on its own device come before it; and swapping any two
// adjacent ops that breaks such a dependency is reported by the verifier.
TEST(Verifier, AgreesWithTheDependencies) {
  int schedules = 0, swaps = 0;
  for (const std::string& name : BuilderNames()) {
    for (RecomputeMode mode : {RecomputeMode::kNone, RecomputeMode::kFull}) {
      auto built = BuildByName(name, 3, 6);
      ASSERT_TRUE(built) << name;
      Schedule s = std::move(*built);
      s.replicas = 2;
      ASSERT_TRUE(CompletePipeline(s, {.recompute = mode, .what = name}));
      const Dependencies deps(s);
      auto broken = [&](const Schedule& t, const Dependencies& dt) {
        for (const auto& program : t.programs) {
          for (const Op& op : program) {
            bool bad = false;
            dt.ForEach(op.id, [&](int32_t dep) { bad = bad || (dt.op(dep).device == op.device && dep > op.id); });
            if (bad) return true;
          }
        }
        return false;
      };
      EXPECT_FALSE(broken(s, deps)) << name;
      ++schedules;
      for (size_t d = 0; d < s.programs.size(); ++d) {
        for (size_t i = 0; i + 1 < s.programs[d].size(); ++i) {
          Schedule t = s;
          std::swap(t.programs[d][i], t.programs[d][i + 1]);
          Renumber(t);
          if (!broken(t, Dependencies(t))) continue;
          EXPECT_FALSE(Verify(t).empty()) << name << ": device " << d << " positions " << i << ", " << i + 1;
          ++swaps;
        }
      }
    }
  }
  EXPECT_EQ(schedules, 2 * static_cast<int>(BuilderNames().size()));
  EXPECT_GT(swaps, 100);
}

}  // namespace
}  // namespace twinpipe::ir
