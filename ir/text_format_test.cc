#include "ir/text_format.h"

#include <gtest/gtest.h>

#include "ir/verifier.h"

namespace twinpipe::ir {
namespace {

TEST(ParseToken, ReadsEveryKind) {
  EXPECT_EQ(OpToken(*ParseToken("2F0")), "2F0");
  EXPECT_EQ(OpToken(*ParseToken("10SEND_F31@4096")), "10SEND_F31@4096");
  EXPECT_EQ(OpToken(*ParseToken("3ALLREDUCE@12")), "3ALLREDUCE@12");
  EXPECT_EQ(ParseToken("STEP")->kind, OpKind::kStep);
  EXPECT_EQ(ParseToken("1W7")->kind, OpKind::kBackwardWeight);
}

TEST(ParseText, InfersShapeWithoutAHeader) {
  auto s = ParseText("0F0 0F1 0B1 0B0 STEP\n1F0 1F1 1B1 1B0 STEP\n", "t");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->num_stages, 2);
  EXPECT_EQ(s->num_micro_batches, 2);
  EXPECT_EQ(s->placement, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(s->programs[1][0].id, 5);
}

TEST(ParseText, EmptyProgramRoundTrips) {
  auto s = ParseText("stages=1 microbatches=1 devices=2 placement=0\n0F0 0B0 STEP\n-\n", "t");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(s->programs[1].empty());
  EXPECT_EQ(PrintText(*ParseText(PrintText(*s), "t")), PrintText(*s));
}

struct BadText {
  const char* text;
  const char* message;
};
void PrintTo(const BadText&, std::ostream* os) { *os << "bad text"; }

class ParseTextErrors : public ::testing::TestWithParam<BadText> {};

TEST_P(ParseTextErrors, NameTheLineAndWhatWasExpected) {
  auto s = ParseText(GetParam().text, "pipe.txt");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    All, ParseTextErrors,
    ::testing::Values(
        BadText{"0F0\n0X1\n",
                "pipe.txt:2: bad token '0X1': unknown op kind 'X'; expected <stage><KIND><micro-batch>"
                "[@bytes] such as 2F0 or 0SEND_F1@4096, <stage>F<micro-batch>+ (overlapped with the next B or I), <stage>ALLREDUCE[@bytes], or STEP"},
        BadText{"F0\n", "pipe.txt:1: bad token 'F0': no stage index; expected <stage><KIND>"
                        "<micro-batch>[@bytes] such as 2F0 or 0SEND_F1@4096, <stage>F<micro-batch>+ (overlapped "
                        "with the next B or I), <stage>ALLREDUCE[@bytes], or STEP"},
        BadText{"0F\n", "pipe.txt:1: bad token '0F': no micro-batch index; expected <stage><KIND>"
                        "<micro-batch>[@bytes] such as 2F0 or 0SEND_F1@4096, <stage>F<micro-batch>+ (overlapped "
                        "with the next B or I), <stage>ALLREDUCE[@bytes], or STEP"},
        BadText{"0F0 0B0+\n", "pipe.txt:1: bad token '0B0+': only a forward pairs with a backward ('+'); expected "
                               "<stage><KIND><micro-batch>[@bytes] such as 2F0 or 0SEND_F1@4096, <stage>F<micro-batch>+ "
                               "(overlapped with the next B or I), <stage>ALLREDUCE[@bytes], or STEP"},
        BadText{"0F0@12\n", "pipe.txt:1: bad token '0F0@12': only comm and all-reduce ops carry "
                            "bytes; expected <stage><KIND><micro-batch>[@bytes] such as 2F0 or "
                            "0SEND_F1@4096, <stage>F<micro-batch>+ (overlapped with the next B or I), <stage>ALLREDUCE[@bytes], or STEP"},
        BadText{"99999999999F0\n", "pipe.txt:1: bad token '99999999999F0': no stage index; "
                                   "expected <stage><KIND><micro-batch>[@bytes] such as 2F0 or "
                                   "0SEND_F1@4096, <stage>F<micro-batch>+ (overlapped with the next B or I), <stage>ALLREDUCE[@bytes], or STEP"},
        BadText{"stages=2 microbatches=x placement=0,1\n0F0\n",
                "pipe.txt:1: microbatches=x: expected an integer from 1 to 16777216"},
        BadText{"stages=2 microbatches=1 colour=red placement=0,1\n",
                "pipe.txt:1: unknown header key 'colour': expected stages, microbatches, devices, "
                "replicas or placement"},
        BadText{"stages=2 microbatches=1\n0F0\n",
                "pipe.txt:1: header needs stages=, microbatches= and placement="},
        BadText{"stages=2 microbatches=1 placement=0\n0F0\n",
                "pipe.txt: placement lists 1 devices for stages=2"},
        BadText{"stages=1 microbatches=1 devices=3 placement=0\n0F0\n",
                "pipe.txt: header says devices=3 but 1 device lines follow"},
        BadText{"0F0\nstages=1 microbatches=1 placement=0\n",
                "pipe.txt:2: header line (stages=...) must come once, before the device lines"},
        BadText{"1F0 1B0\n", "pipe.txt: stage 0 has no ops, so its device is unknown (stages run 0..1, the last named by 1F0 on device 0)"},
        BadText{"# nothing\n\n", "pipe.txt: no device lines"},
        BadText{"# twinpipe schedule v2\n0F0 0B0\n", "pipe.txt:1: twinpipe schedule version '2': this twinpipe reads version 1"}));

}  // namespace
}  // namespace twinpipe::ir
