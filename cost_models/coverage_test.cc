// A calibration's coverage: the ranges a set of runs spans (each quantity
// against the config's own figure, the GEMMs against the kernels' shapes),
// the lines a config outside them gets (none inside or at either end, one
// just outside each end of each quantity), and its place in the calibration
// file: a round trip, bad fields named by their path, old files without it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "cost_models/calibration.h"
#include "cost_models/config.h"
#include "cost_models/coverage.h"

namespace twinpipe::cost {
namespace {

struct Shape {
  int gpus = 4, t = 1, stages = 2, micro_batch = 2, seq = 512, d_model = 1024;
  const char* dtype = "bf16";
};

Config Transformer(const Shape& s) {
  const std::string text = fmt::format(
      R"({{"model": {{"generator": "transformer", "layers": 8, "d_model": {}, "ffn": {}, "heads": 16, "seq": {},
          "vocab": 32000, "dtype": "{}"}},
          "training": {{"batch": {}, "microbatches": 4, "optimizer": "adam"}},
          "pipeline": {{"stages": {}, "schedule": "1f1b", "recompute": "full", "tensor_parallel": {}}},
          "cluster": {{"device": "H100-SXM", "devices": {}, "gpus_per_node": 8, "link": "nvlink4"}}}})",
      s.d_model, 4 * s.d_model, s.seq, s.dtype, 4 * s.micro_batch, s.stages, s.t, s.gpus);
  auto c = LoadConfig(text, "c.json");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

TEST(Coverage, WhatOneConfigHas) {
  const Config c = Transformer({.gpus = 8, .t = 2, .stages = 2, .micro_batch = 2, .seq = 512, .d_model = 1024});
  const Coverage cov = CoverageOf(c);
  auto one = [](double v) { return Range{v, v}; };
  EXPECT_EQ(cov.ranges.at(Quantity::kParameters), one(ModelParameters(c)));
  EXPECT_EQ(cov.ranges.at(Quantity::kGpus), one(8));
  EXPECT_EQ(cov.ranges.at(Quantity::kTensorParallel), one(2));
  EXPECT_EQ(cov.ranges.at(Quantity::kStages), one(2));
  EXPECT_EQ(cov.ranges.at(Quantity::kMicroBatch), one(2));
  EXPECT_EQ(cov.ranges.at(Quantity::kSeq), one(512));
  EXPECT_EQ(cov.ranges.at(Quantity::kDModel), one(1024));
  EXPECT_EQ(cov.precisions, std::set<std::string>{"bf16"});
  // The GEMMs on one GPU of the pair, a micro-batch of 2 samples of 512
  // tokens: the attention's head width (1024 / 16) is the least k, the FFN's
  // half (2048 rows of its weight gradient) the most m, the vocabulary's half
  // (16000) the most n and k (the logits' input gradient).
  EXPECT_EQ(cov.ranges.at(Quantity::kGemmK), (Range{64, 16000}));
  EXPECT_EQ(cov.ranges.at(Quantity::kGemmM).most, 2048);
  EXPECT_EQ(cov.ranges.at(Quantity::kGemmN).most, 16000);
  // Scaled by the micro-batch as the kernels' times are: 8 samples' 4096
  // tokens pass the FFN's 2048.
  const Coverage more =
      CoverageOf(Transformer({.gpus = 8, .t = 2, .stages = 2, .micro_batch = 8, .seq = 512, .d_model = 1024}));
  EXPECT_EQ(more.ranges.at(Quantity::kGemmM).most, 4096);
  // A model without kernels has no GEMM shapes and no transformer figures.
  auto explicit_model = LoadConfig(R"({"model": {"layers": [{"name": "a", "fwd_flops": 1e9, "params": 1e6,
      "out_bytes": 4096, "stash_bytes": 4096}]}, "training": {"batch": 4, "microbatches": 2},
      "pipeline": {"stages": 1}, "cluster": {"device": "H100-SXM", "devices": 1}})", "e.json");
  ASSERT_TRUE(explicit_model) << explicit_model.error().message;
  const Coverage e = CoverageOf(*explicit_model);
  for (Quantity q : {Quantity::kSeq, Quantity::kDModel, Quantity::kGemmM, Quantity::kGemmN, Quantity::kGemmK}) {
    EXPECT_FALSE(e.ranges.contains(q)) << static_cast<int>(q);
  }
  EXPECT_EQ(e.ranges.at(Quantity::kParameters), one(1e6));
}

TEST(Coverage, RunsSpanTheirRanges) {
  const Config a = Transformer({.gpus = 4, .t = 1, .stages = 2, .micro_batch = 1, .seq = 512, .d_model = 1024});
  const Config b = Transformer({.gpus = 16, .t = 4, .stages = 4, .micro_batch = 4, .seq = 2048, .d_model = 2048,
                                .dtype = "fp16"});
  const Coverage both = CoverageOf(std::vector<const Config*>{&a, &b});
  EXPECT_EQ(both.ranges.at(Quantity::kGpus), (Range{4, 16}));
  EXPECT_EQ(both.ranges.at(Quantity::kTensorParallel), (Range{1, 4}));
  EXPECT_EQ(both.ranges.at(Quantity::kStages), (Range{2, 4}));
  EXPECT_EQ(both.ranges.at(Quantity::kMicroBatch), (Range{1, 4}));
  EXPECT_EQ(both.ranges.at(Quantity::kSeq), (Range{512, 2048}));
  EXPECT_EQ(both.ranges.at(Quantity::kDModel), (Range{1024, 2048}));
  EXPECT_EQ(both.ranges.at(Quantity::kParameters), (Range{ModelParameters(a), ModelParameters(b)}));
  EXPECT_EQ(both.precisions, (std::set<std::string>{"bf16", "fp16"}));
  const Coverage ca = CoverageOf(a), cb = CoverageOf(b);
  for (Quantity q : {Quantity::kGemmM, Quantity::kGemmN, Quantity::kGemmK}) {
    EXPECT_EQ(both.ranges.at(q).least, std::min(ca.ranges.at(q).least, cb.ranges.at(q).least));
    EXPECT_EQ(both.ranges.at(q).most, std::max(ca.ranges.at(q).most, cb.ranges.at(q).most));
  }
  // Each run, and so each end of each range, lies inside.
  EXPECT_EQ(Extrapolations(both, a), std::vector<std::string>{});
  EXPECT_EQ(Extrapolations(both, b), std::vector<std::string>{});
  // Beyond them, a line for each quantity out.
  const Config far = Transformer({.gpus = 64, .t = 8, .stages = 8, .micro_batch = 1, .seq = 2048, .d_model = 2048});
  const std::vector<std::string> lines = Extrapolations(both, far);
  ASSERT_EQ(lines.size(), 4u) << fmt::format("{}", fmt::join(lines, "\n"));
  EXPECT_EQ(lines[0], "GPUs 64 outside the fitted 4..16");
  EXPECT_EQ(lines[1], "tensor-parallel degree 8 outside the fitted 1..4");
  EXPECT_EQ(lines[2], "pipeline stages 8 outside the fitted 2..4");
  // The output projection's weight gradient on one GPU of 8: 2048 / 8 rows.
  EXPECT_EQ(lines[3], "smallest GEMM dimension m 256 outside the fitted 512..8192");
}

// Ranges of 8..16 for every quantity (parameters: 8e9..16e9), one precision.
Coverage Fitted() {
  Coverage c;
  for (const QuantityNames& q : kQuantities) {
    c.ranges[q.quantity] = q.quantity == Quantity::kParameters ? Range{8e9, 16e9} : Range{8, 16};
  }
  c.precisions = {"bf16"};
  return c;
}

TEST(Coverage, InsideAtBothEndsAndJustOutsideEach) {
  const Coverage fitted = Fitted();
  // Every quantity at its least, then at its most: inside.
  for (bool most : {false, true}) {
    Coverage asked = fitted;
    for (auto& [q, r] : asked.ranges) r.least = r.most = most ? r.most : r.least;
    EXPECT_EQ(Extrapolations(fitted, asked), std::vector<std::string>{}) << "most " << most;
  }
  // A config's GEMMs spanning the whole fitted range: inside.
  EXPECT_EQ(Extrapolations(fitted, fitted), std::vector<std::string>{});
  // One quantity just below its least, or just above its most: its line alone.
  for (const QuantityNames& q : kQuantities) {
    const bool params = q.quantity == Quantity::kParameters;
    const double below = params ? 8e9 - 1 : 7, above = params ? 16e9 + 1 : 17;
    for (double v : {below, above}) {
      Coverage asked = fitted;
      for (auto& [quantity, r] : asked.ranges) r.most = r.least;  // one value each, inside
      asked.ranges[q.quantity] = Range{v, v};
      // A parameter count with the digits that tell it from the end it passes.
      const std::string expected =
          params ? fmt::format("model parameters {} outside the fitted 8B..16B",
                               v == below ? "7.999999999B" : "16.000000001B")
                 : fmt::format("{} {} outside the fitted 8..16", q.label, v);
      EXPECT_EQ(Extrapolations(fitted, asked), std::vector<std::string>{expected}) << q.key;
    }
  }
  // Below a billion, in millions.
  Coverage small = fitted;
  small.ranges[Quantity::kParameters] = Range{125e6, 350e6};
  Coverage asked_small = small;
  for (auto& [q, r] : asked_small.ranges) r.most = r.least;
  asked_small.ranges[Quantity::kParameters] = Range{774e6, 774e6};
  EXPECT_EQ(Extrapolations(small, asked_small),
            std::vector<std::string>{"model parameters 774M outside the fitted 125M..350M"});
  // A GEMM dimension's range past either end says which end.
  Coverage asked = fitted;
  asked.ranges[Quantity::kGemmN] = Range{4, 53248};
  EXPECT_EQ(Extrapolations(fitted, asked),
            (std::vector<std::string>{"smallest GEMM dimension n 4 outside the fitted 8..16",
                                      "largest GEMM dimension n 53248 outside the fitted 8..16"}));
}

TEST(Coverage, PrecisionsAndQuantitiesTheRunsLacked) {
  Coverage fitted = Fitted();
  fitted.precisions = {"bf16", "fp16"};
  fitted.ranges.erase(Quantity::kSeq);
  Coverage asked = Fitted();
  for (auto& [q, r] : asked.ranges) r.most = r.least;
  asked.ranges[Quantity::kSeq] = Range{4096, 4096};
  asked.precisions = {"fp8"};
  EXPECT_EQ(Extrapolations(fitted, asked),
            (std::vector<std::string>{"sequence length 4096: the fitted runs have none",
                                      "precision fp8 not among the fitted bf16, fp16"}));
}

// A search's candidates share the model and the GPUs searched, nothing else.
TEST(Coverage, ModelCoverageOfASearch) {
  const Config c = Transformer({.gpus = 8, .t = 2, .stages = 2, .micro_batch = 2, .seq = 512, .d_model = 1024});
  const Coverage m = ModelCoverage(c, 64);
  std::vector<Quantity> kept;
  for (const auto& [q, r] : m.ranges) kept.push_back(q);
  EXPECT_EQ(kept, (std::vector<Quantity>{Quantity::kParameters, Quantity::kGpus, Quantity::kSeq, Quantity::kDModel}));
  EXPECT_EQ(m.ranges.at(Quantity::kGpus), (Range{64, 64}));
  EXPECT_EQ(m.precisions, std::set<std::string>{"bf16"});
  EXPECT_EQ(Extrapolations(CoverageOf(c), m), std::vector<std::string>{"GPUs 64 outside the fitted 8..8"});
}

std::string Message(std::string_view file) {
  auto read = ReadCalibration(file, "cal.json");
  return read ? std::string("(read without error)") : read.error().message;
}

TEST(Coverage, CalibrationFileRoundTripsItAndNamesBadFields) {
  Calibration cal;
  cal.device = "H100-SXM";
  cal.profile = ProfileFit{0.6, 0.8, 1e-5, 2e-6, 4e-6, 2};
  const Config a = Transformer({.gpus = 4, .t = 1, .stages = 2, .micro_batch = 1});
  const Config b = Transformer({.gpus = 8, .t = 2, .stages = 2, .micro_batch = 2, .dtype = "fp8"});
  cal.coverage = CoverageOf(std::vector<const Config*>{&a, &b});
  const std::string text = WriteCalibration(cal);
  EXPECT_NE(text.find(R"("gpus": [
      4,
      8
    ],)"),
            std::string::npos)
      << text;
  auto back = ReadCalibration(text, "cal.json");
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_TRUE(back->coverage);
  EXPECT_EQ(*back->coverage, *cal.coverage);
  EXPECT_EQ(WriteCalibration(*back), text);

  // A file without it (written before it was recorded) reads as none.
  auto old = ReadCalibration(R"({"format": "twinpipe-calibration", "device": "H100-SXM"})", "cal.json");
  ASSERT_TRUE(old) << old.error().message;
  EXPECT_FALSE(old->coverage);

  // Bad fields, each named by its path.
  const std::string head = R"({"format": "twinpipe-calibration", "coverage": )";
  const std::string every = R"("parameters": [1e9, 2e9], "gpus": [8, 16], "tensor_parallel": [1, 8],
      "stages": [1, 4], "micro_batch": [1, 2], "precisions": ["bf16"])";
  EXPECT_EQ(Message(head + "{" + every + "}}"), "(read without error)");
  EXPECT_EQ(Message(head + "[]}"), "cal.json: /coverage: expected an object, got array");
  EXPECT_EQ(Message(head + R"({"gpus": [8, 16]}})"),
            "cal.json: /coverage: missing key 'parameters' (an array [least, most])");
  EXPECT_EQ(Message(head + "{" + every + R"(, "seq": [4096]}})"),
            "cal.json: /coverage/seq: expected [least, most], got [4096]");
  EXPECT_EQ(Message(head + "{" + every + R"(, "seq": [4096, "long"]}})"),
            "cal.json: /coverage/seq/1: expected a number, got \"long\"");
  EXPECT_EQ(Message(head + "{" + every + R"(, "gemm_n": [-1, 8]}})"),
            "cal.json: /coverage/gemm_n/0: expected a number >= 0 and at most 1.7976931348623157e+308, got -1");
  EXPECT_EQ(Message(head + "{" + every + R"(, "d_model": [4096, 1024]}})"),
            "cal.json: /coverage/d_model: expected [least, most] with least <= most, got [4096,1024]");
  EXPECT_EQ(Message(head + "{" + every + R"(, "seqq": [1, 2]}})"),
            "cal.json: /coverage/seqq: unknown key (expected one of d_model, gemm_k, gemm_m, gemm_n, gpus, "
            "micro_batch, parameters, precisions, seq, stages, tensor_parallel)");
  EXPECT_EQ(Message(head + R"({"parameters": [1e9, 2e9], "gpus": [8, 16], "tensor_parallel": [1, 8],
      "stages": [1, 4], "micro_batch": [1, 2], "precisions": ["bf16", "fp7"]}})"),
            "cal.json: /coverage/precisions/1: expected a precision (fp32, tf32, fp16, bf16, fp8), got \"fp7\"");
}

}  // namespace
}  // namespace twinpipe::cost
