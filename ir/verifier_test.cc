#include "ir/verifier.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/builders.h"
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

}  // namespace
}  // namespace twinpipe::ir
