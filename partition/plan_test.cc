#include "partition/plan.h"

#include <gtest/gtest.h>

namespace twinpipe::partition {
namespace {

cost::Config Load(const std::string& text) {
  auto c = cost::LoadConfig(text, "t.json");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

// PlanPartition with the algorithm named as a config names it.
Result<PartitionReport> PlanNamed(const cost::Config& c, std::string_view algorithm) {
  return PlanPartition(c, *cost::PartitionAlgorithmFromName(algorithm));
}

TEST(PlanPartition, BalancesGivenCosts) {
  // The paper's c_i: costs 1, 1, 1, 3, 1, 1 into 3 cells -> {1,1,1} {3} {1,1}.
  const auto c = Load(R"({
    "model": {"layers": [{"fwd_flops": 1e9, "out_bytes": 8, "cost": 1}, {"fwd_flops": 1e9, "out_bytes": 8, "cost": 1},
                         {"fwd_flops": 1e9, "out_bytes": 8, "cost": 1}, {"fwd_flops": 1e9, "out_bytes": 8, "cost": 3},
                         {"fwd_flops": 1e9, "out_bytes": 8, "cost": 1}, {"fwd_flops": 1e9, "out_bytes": 8, "cost": 1}]},
    "training": {"batch": 4, "microbatches": 2}, "pipeline": {"stages": 3}, "cluster": {"device": "V100", "link": "pcie3"}})");
  for (const char* algo : {"minmax", "gpipe", "memory"}) {
    auto r = PlanNamed(c, algo);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->user_costs);
    ASSERT_EQ(r->cells.size(), 3u) << algo;
    EXPECT_EQ(r->cells[0].last_layer, 2) << algo;
    EXPECT_EQ(r->cells[1].first_layer, 3) << algo;
    EXPECT_EQ(r->cells[1].last_layer, 3) << algo;
    EXPECT_EQ(r->cells[1].cost, 3) << algo;
    EXPECT_EQ(r->cells[0].boundary_bytes, 8 * 2) << algo;  // out_bytes x micro-batch of 2
    EXPECT_EQ(r->cells[2].boundary_bytes, 0) << algo;
  }
}

const char* kTransformer = R"({
  "model":    {"generator": "transformer", "layers": 24, "d_model": 1024, "ffn": 4096, "heads": 16, "seq": 512, "vocab": 32000, "dtype": "bf16"},
  "training": {"batch": 128, "microbatches": 16},
  "pipeline": {"stages": 4, "schedule": "gpipe", "recompute": "full"},
  "cluster":  {"device": "H100-SXM", "devices": 4, "link": "nvlink4"}
})";

TEST(PlanPartition, MinMaxBeatsOrTiesEveryOtherAlgorithm) {
  const auto c = Load(kTransformer);
  auto minmax = PlanNamed(c, "minmax");
  auto gpipe = PlanNamed(c, "gpipe");
  ASSERT_TRUE(minmax && gpipe);
  EXPECT_LE(minmax->bottleneck_s, gpipe->bottleneck_s * (1 + 1e-12));
  EXPECT_LT(minmax->imbalance, 1.2);
  double params = 0;
  for (const auto& cell : minmax->cells) params += cell.params;
  double model_params = 0;
  for (const auto& l : c.model.layers) model_params += l.params;
  EXPECT_DOUBLE_EQ(params, model_params);
}

TEST(PlanPartition, SlowerDevicesGetLessWork) {
  auto text = std::string(kTransformer);
  text.replace(text.find("\"H100-SXM\""), 10, R"(["H100-SXM", "A100-80GB", "H100-SXM", "H100-SXM"])");
  const auto c = Load(text);
  auto r = PlanNamed(c, "minmax");
  ASSERT_TRUE(r);
  const int a100_layers = r->cells[1].last_layer - r->cells[1].first_layer + 1;
  const int h100_layers = r->cells[2].last_layer - r->cells[2].first_layer + 1;
  EXPECT_LT(a100_layers, h100_layers);
}

TEST(PlanPartition, MemoryPartitionRespectsCapacityOrSaysWhatDoesNotFit) {
  auto text = std::string(kTransformer);
  text.replace(text.find("\"batch\": 128"), 12, "\"batch\": 512");
  const auto fits = Load(text);
  text.replace(text.find("\"recompute\": \"full\""), 19, "\"recompute\": \"none\"");
  const auto c = Load(text);
  auto minmax = PlanNamed(c, "minmax");
  ASSERT_TRUE(minmax);
  // Without recompute, GPipe stashes 16 micro-batches of 32 sequences: the
  // fastest cut overflows 80 GB on some device, and no cut fits.
  double worst = 0;
  for (const auto& cell : minmax->cells) worst = std::max(worst, cell.peak_memory_bytes);
  EXPECT_GT(worst, c.cluster.devices[0].memory_bytes);
  auto memory = PlanNamed(c, "memory");
  ASSERT_FALSE(memory);
  EXPECT_EQ(memory.error().kind, ErrorKind::kRuntime);
  EXPECT_NE(memory.error().message.find("GiB over"), std::string::npos) << memory.error().message;
  // With recompute the same model fits, and the memory partition stays under the cap.
  auto ok = PlanNamed(fits, "memory");
  ASSERT_TRUE(ok) << ok.error().message;
  for (const auto& cell : ok->cells) EXPECT_LE(cell.peak_memory_bytes, fits.cluster.devices[0].memory_bytes);
}

TEST(PlanPartition, ManualErrorsNameTheJsonPath) {
  auto text = std::string(kTransformer);
  text.replace(text.find("\"recompute\": \"full\""), 19,
               "\"recompute\": \"full\", \"partition\": \"manual\", \"first_layers\": [0, 9, 5, 20]");
  const auto c = Load(text);
  auto r = PlanNamed(c, "manual");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "t.json: /pipeline/first_layers/2: expected a layer index above 9 and below 26, got 5");
}

}  // namespace
}  // namespace twinpipe::partition
