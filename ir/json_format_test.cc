#include "ir/json_format.h"

#include <gtest/gtest.h>

#include "ir/builders.h"
#include "ir/passes.h"

namespace twinpipe::ir {
namespace {

TEST(PrintJson, WritesEveryField) {
  Schedule s = BuildGpipe(2, 1);
  ASSERT_TRUE(InsertComm(s, CommBytes{{64}, {32}}));
  const std::string json = PrintJson(s);
  EXPECT_NE(json.find(R"({"id": 1, "kind": "SEND_F", "device": 0, "stage": 0, "microbatch": 0, "peer": 1, "bytes": 64})"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"({"id": 4, "kind": "STEP", "device": 0})"), std::string::npos) << json;
}

TEST(PrintJson, APairedForwardRoundTrips) {
  Schedule s = *BuildDualPipeV(2, 4);
  int pairs = 0;
  for (const auto& program : s.programs) {
    for (const Op& op : program) pairs += op.paired;
  }
  ASSERT_GT(pairs, 0);
  const std::string json = PrintJson(s);
  auto back = ParseJson(json, "s.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, s);
  size_t written = 0;
  for (size_t at = json.find("\"paired\": true"); at != std::string::npos; at = json.find("\"paired\": true", at + 1)) {
    ++written;
  }
  EXPECT_EQ(written, static_cast<size_t>(pairs));
}

struct BadJson {
  std::string text;
  std::string message;
};
void PrintTo(const BadJson&, std::ostream* os) { *os << "bad json"; }

class ParseJsonErrors : public ::testing::TestWithParam<BadJson> {};

TEST_P(ParseJsonErrors, NameThePathAndWhatWasExpected) {
  auto s = ParseJson(GetParam().text, "s.json");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message.substr(0, GetParam().message.size()), GetParam().message)
      << s.error().message;
}

const std::string kHead =
    R"({"format": "twinpipe-schedule", "version": 1, "stages": 1, "microbatches": 1, "devices": 1, "placement": [0], "programs": )";

INSTANTIATE_TEST_SUITE_P(
    All, ParseJsonErrors,
    ::testing::Values(
        BadJson{"{\"format\": ", "s.json: not valid JSON: [json.exception.parse_error.101]"},
        BadJson{"[]", "s.json: /: expected an object"},
        BadJson{kHead + R"([[{"id": 0, "kind": "B", "device": 0, "stage": 0, "microbatch": 0, "paired": true}]]})",
                "s.json: /programs/0/0/paired: only a forward pairs with a backward; this op is B"},
        BadJson{kHead + R"([[{"id": 0, "kind": "F", "device": 0, "stage": 0, "microbatch": 0, "paired": 1}]]})",
                "s.json: /programs/0/0/paired: expected"},
        BadJson{R"({"format": "x"})", "s.json: /format: expected \"twinpipe-schedule\""},
        BadJson{kHead + R"([[{"id": 0, "kind": "Q", "device": 0}]]})",
                "s.json: /programs/0/0/kind: expected one of F, B, I, W, R"},
        BadJson{kHead + R"([[{"id": 0, "kind": "F", "device": 0, "stage": 0}]]})",
                "s.json: /programs/0/0: missing key 'microbatch'"},
        BadJson{kHead + R"([[{"id": 0, "kind": "F", "device": 0, "stage": 3, "microbatch": 0}]]})",
                "s.json: /programs/0/0/stage: expected an integer from 0 to 0, got 3"},
        BadJson{kHead + R"([[{"id": 0, "kind": "F", "device": 0, "stage": "0", "microbatch": 0}]]})",
                "s.json: /programs/0/0/stage: expected an integer, got \"0\""},
        BadJson{kHead + R"([[{"id": 0, "kind": "F", "device": 0, "stage": 0, "microbatch": 0, "peer": 0}]]})",
                "s.json: /programs/0/0/peer: a F op has no peer"},
        BadJson{kHead + R"([[{"id": 0, "kind": "F", "device": 0, "stage": 0, "microbatch": 0, "colour": 1}]]})",
                "s.json: /programs/0/0/colour: unknown key"},
        BadJson{kHead + R"([])}", "s.json: /programs: has 0 programs, expected one per device (1)"},
        BadJson{R"({"format": "twinpipe-schedule", "version": 1, "stages": -1, "microbatches": 1, "devices": 1})",
                "s.json: /stages: expected an integer from 1 to 16777216, got -1"},
        // A missing member of the root names the root.
        BadJson{R"({"format": "twinpipe-schedule", "stages": 1})",
                "s.json: /: missing key 'version' (an integer from 1 to 1)"},
        BadJson{kHead + R"([[{"id": 0, "kind": "F", "device": 0, "stage": 0, "microbatch": 0}, {"id": 0, "kind": "STEP", "device": 0}]]})",
                "s.json: /programs/0/1/id: id 0 is already /programs/0/0's"},
        BadJson{kHead + R"([[{"id": -1, "kind": "STEP", "device": 0}]]})",
                "s.json: /programs/0/0/id: expected an integer from 0 to 2147483647, got -1"},
        BadJson{R"({"format": "twinpipe-schedule", "version": 1, "stages": 2, "microbatches": 1, "devices": 1, "placement": [0, 1]})",
                "s.json: /placement/1: expected a device index 0..0"}));

}  // namespace
}  // namespace twinpipe::ir
