#include "ir/json_reader.h"

#include <functional>

#include <gtest/gtest.h>

namespace twinpipe::ir::json {
namespace {

enum class Fruit { kApple, kPear };
constexpr NameTable<Fruit, 2> kFruitNames{{{"apple", Fruit::kApple}, {"pear", Fruit::kPear}}};

// The message of the first problem `read` meets ("" when there is none).
template <typename F>
std::string Problem(F&& read) {
  auto result = TryRead(read);
  return result ? "" : result.error().message;
}

const Json kDoc = Json::parse(R"({"n": 3, "x": 0.5, "s": "pear", "b": true, "o": {"k": 1}, "a": [1]})");

TEST(Reader, ReadsEveryKindOfMember) {
  const Reader r("d.json");
  EXPECT_EQ(r.Int(kDoc, "n", "", 0, 10), 3);
  EXPECT_EQ(r.Int(kDoc, "absent", "", 0, 10, 7), 7);
  EXPECT_EQ(r.Number(kDoc, "x", "", 0, 1), 0.5);
  EXPECT_EQ(r.String(kDoc, "s", "", {}, std::nullopt), "pear");
  EXPECT_TRUE(r.Bool(kDoc, "b", "", false));
  EXPECT_EQ(r.Object(kDoc, "o", "").at("k"), 1);
  EXPECT_EQ(r.Enum(kDoc, "s", "", kFruitNames, std::nullopt), Fruit::kPear);
  EXPECT_EQ(r.Enum(kDoc, "absent", "", kFruitNames, Fruit::kApple), Fruit::kApple);
  EXPECT_EQ(Problem([&] { r.Keys(kDoc, "", {"a", "b", "n", "o", "s", "x"}); }), "");
}

struct Case {
  std::function<void(const Reader&)> read;
  std::string message;
};

TEST(Reader, EveryProblemNamesTheSourceThePathAndWhatWasExpected) {
  const std::vector<Case> cases = {
      {[](const Reader& r) { r.Int(kDoc, "m", "", 1, 4); }, "d.json: /: missing key 'm' (an integer from 1 to 4)"},
      {[](const Reader& r) { r.Int(kDoc, "s", "", 1, 4); }, "d.json: /s: expected an integer, got \"pear\""},
      {[](const Reader& r) { r.Int(kDoc, "x", "", 1, 4); }, "d.json: /x: expected an integer, got 0.5"},
      {[](const Reader& r) { r.Int(kDoc, "n", "", 4, 9); }, "d.json: /n: expected an integer from 4 to 9, got 3"},
      {[](const Reader& r) { r.Number(kDoc, "y", "", 0, 1); }, "d.json: /: missing key 'y' (a number)"},
      {[](const Reader& r) { r.Number(kDoc, "b", "", 0, 1); }, "d.json: /b: expected a number, got true"},
      {[](const Reader& r) { r.Number(kDoc, "n", "", 0, 1); }, "d.json: /n: expected a number >= 0 and at most 1, got 3"},
      {[](const Reader& r) { r.Number(kDoc, "n", "", 3, 9, std::nullopt, true); },
       "d.json: /n: expected a number > 3 and at most 9, got 3"},
      {[](const Reader& r) { r.String(kDoc, "t", "", {"a", "b"}, std::nullopt); }, "d.json: /: missing key 't' (one of a, b)"},
      {[](const Reader& r) { r.String(kDoc, "n", "", {}, std::nullopt); }, "d.json: /n: expected a string, got 3"},
      {[](const Reader& r) { r.Enum(kDoc, "s", "", NameTable<Fruit, 1>{{{"apple", Fruit::kApple}}}, std::nullopt); },
       "d.json: /s: 'pear' is not one of apple"},
      {[](const Reader& r) { r.Bool(kDoc, "n", "", true); }, "d.json: /n: expected true or false, got 3"},
      {[](const Reader& r) { r.Object(kDoc, "p", ""); }, "d.json: /: missing section 'p'"},
      {[](const Reader& r) { r.Object(kDoc, "a", ""); }, "d.json: /a: expected an object, got array"},
      {[](const Reader& r) { r.Keys(kDoc, "", {"x", "n", "s"}); }, "d.json: /a: unknown key (expected one of n, s, x)"},
      {[](const Reader& r) { r.Int(kDoc.at("o"), "k", "/o", 2, 3); }, "d.json: /o/k: expected an integer from 2 to 3, got 1"},
      {[](const Reader& r) { r.Fail("/o", "is odd"); }, "d.json: /o: is odd"},
      {[](const Reader& r) { r.Parse("{\"a\": "); },
       "d.json: not valid JSON: [json.exception.parse_error.101] parse error at line 1, column 7: syntax error while "
       "parsing value - unexpected end of input; expected '[', '{', or a literal"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(Problem([&] { cases[i].read(Reader("d.json")); }), cases[i].message) << "case " << i;
  }
}

// A document inside a file (a table of runs' configs) names its whole path.
TEST(Reader, ABasePathPrefixesEveryPath) {
  const Reader r("runs.jsonl:3", "/config");
  EXPECT_EQ(Problem([&] { r.Int(kDoc, "n", "/pipeline", 5, 6); }),
            "runs.jsonl:3: /config/pipeline/n: expected an integer from 5 to 6, got 3");
  EXPECT_EQ(Problem([&] { r.Fail("", "expected a config object"); }), "runs.jsonl:3: /config: expected a config object");
}

// A key given twice in one object is refused at its path (the parser
// would keep the last silently); the same key in two objects is not.
TEST(Reader, ParseRefusesAKeyGivenTwiceInOneObject) {
  const Reader r("d.json", "/config");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"a": 1, "a": 2})", "d.json: /config/a: this key is given twice in its object (expected each key once)"},
      {R"({"p": {"stages": 2, "k": [1, {}], "stages": 3}})", "d.json: /config/p/stages: this key"},
      {R"({"x": [0, [1, 2], {"y": {"z": 1}, "w": 2, "w": 3}]})", "d.json: /config/x/2/w: this key"},
      {R"([{"a": 1}, 5, {"b": [], "b": 1}])", "d.json: /config/2/b: this key"},
      {R"({"o": {}, "o": {}})", "d.json: /config/o: this key"},
  };
  for (const auto& [text, message] : cases) {
    const std::string problem = Problem([&] { r.Parse(text); });
    EXPECT_EQ(problem.substr(0, message.size()), message) << text;
  }
  const Json fine = r.Parse(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 1}, {"k": 2}], "k": 0})");
  EXPECT_EQ(fine.at("b").at("k"), 2);
  EXPECT_EQ(fine.at("c").at(1).at("k"), 2);
  EXPECT_EQ(Problem([&] { r.Parse("{\"a\": 1,}"); }).substr(0, 23), "d.json: not valid JSON:");
}

TEST(TryRead, ReturnsTheValueOrTheProblemAsBadInput) {
  auto three = TryRead([] { return Reader("d.json").Int(kDoc, "n", "", 0, 9); });
  ASSERT_TRUE(three);
  EXPECT_EQ(*three, 3);
  auto bad = TryRead([] { return Reader("d.json").Int(kDoc, "n", "", 5, 9); });
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::kBadInput);
  EXPECT_TRUE(TryRead([] {}));
}

}  // namespace
}  // namespace twinpipe::ir::json
