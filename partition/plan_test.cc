#include "partition/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "cost_models/memory_model.h"
#include "cost_models/plan_costs.h"
#include "ir/builders.h"
#include "partition/pipeline_plan.h"

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

// /pipeline/memory_cap (or --memory-cap) bounds the memory partition as a
// device's memory does: its cut is the fastest of every cut whose cells all
// fit the cap (brute force over the C(L-1, 3) cuts), where the fastest cut
// of all has a cell over it (1F1B: stage 0 holds 4 micro-batches in flight,
// stage 3 one); given as an override it cuts alike.
TEST(PlanPartition, MemoryPartitionCutsToTheMemoryCap) {
  auto text = std::string(kTransformer);
  text.replace(text.find("\"recompute\": \"full\""), 19, "\"recompute\": \"none\", \"partition\": \"memory\"");
  text.replace(text.find("\"schedule\": \"gpipe\""), 19, "\"schedule\": \"1f1b\"");
  const cost::Config c = Load(text);
  const int L = static_cast<int>(c.model.layers.size());
  auto shape = ir::BuildShape("1f1b", 4, 16);
  ASSERT_TRUE(shape);
  const auto peaks = cost::StagePeaks(*shape, c.pipeline.recompute);
  struct Cut {
    double bottleneck, worst;
  };
  std::vector<Cut> cuts;
  for (int a = 1; a < L; ++a) {
    for (int b = a + 1; b < L; ++b) {
      for (int d = b + 1; d < L; ++d) {
        const PartitionReport r = DescribePartition(c, {0, a, b, d}, &peaks);
        double worst = 0;
        for (const auto& cell : r.cells) worst = std::max(worst, cell.peak_memory_bytes);
        cuts.push_back({r.bottleneck_s, worst});
      }
    }
  }
  const double device = c.cluster.devices[0].memory_bytes;
  const auto fastest = std::min_element(cuts.begin(), cuts.end(), [&](const Cut& x, const Cut& y) {
    return std::make_pair(x.worst > device, x.bottleneck) < std::make_pair(y.worst > device, y.bottleneck);
  });
  double least = device;
  for (const Cut& k : cuts) least = std::min(least, k.worst);
  ASSERT_LT(least, fastest->worst);  // a cap between them bites
  const double cap = (least + fastest->worst) / 2;
  double best = std::numeric_limits<double>::infinity();
  for (const Cut& k : cuts) {
    if (k.worst <= cap) best = std::min(best, k.bottleneck);
  }
  auto uncapped = PlanFromConfig(c);
  ASSERT_TRUE(uncapped) << uncapped.error().message;
  EXPECT_NEAR(uncapped->partition.bottleneck_s, fastest->bottleneck, 1e-12 * fastest->bottleneck);
  cost::Config capped = c;
  capped.pipeline.memory_cap = cap;
  PlanOverrides override_cap;
  override_cap.memory_cap_bytes = cap;
  for (auto plan : {PlanFromConfig(capped), PlanFromConfig(c, override_cap)}) {
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_NEAR(plan->partition.bottleneck_s, best, 1e-12 * best);
    EXPECT_GT(plan->partition.bottleneck_s, uncapped->partition.bottleneck_s);
    for (const auto& cell : plan->partition.cells) EXPECT_LE(cell.peak_memory_bytes, cap);
  }
  // Below every cut's peak: nothing fits, said as for a device's memory.
  capped.pipeline.memory_cap = least * 0.99;
  auto none = PlanFromConfig(capped);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().kind, ErrorKind::kRuntime);
  EXPECT_NE(none.error().message.find("under the memory cap (/pipeline/memory_cap or --memory-cap)"),
            std::string::npos) << none.error().message;
  // Two stages a device (interleaved): each its half of the cap, still said.
  std::string chunked = text;
  chunked.replace(chunked.find("\"schedule\": \"1f1b\""), 18,
                  fmt::format("\"schedule\": \"interleaved\", \"chunks\": 2, \"memory_cap\": {}", least * 0.5));
  auto halves = PlanFromConfig(Load(chunked));
  ASSERT_FALSE(halves);
  EXPECT_NE(halves.error().message.find("under the memory cap"), std::string::npos) << halves.error().message;
  // The cap bounds the auto schedule and the memory partition only.
  text.replace(text.find("\"partition\": \"memory\""), 21, "\"partition\": \"minmax\", \"memory_cap\": 1e10");
  auto refused = cost::LoadConfig(text, "t.json");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message,
            "t.json: /pipeline/memory_cap: only the auto schedule and the memory partition plan to a memory cap; this "
            "config's schedule is '1f1b' and its partition 'minmax'");
}

// A schedule of several stages a device (interleaved) is cut on a copy of
// the config with a device per stage; its GPUs stay the run's: the cells'
// static bytes shard over the run's replicas, and a cut between two nodes
// crosses them, as the simulator charges (before, the copy had 0 or 1
// replicas: sharded cells held unsharded state, and every device sat in
// node 0 under Megatron's order).
TEST(PlanPartition, CellsOfSeveralStagesADeviceKeepTheRunsGpus) {
  auto config = [](std::string_view sharding, int gpus_per_node) {
    return Load(fmt::format(R"({{
      "model": {{"generator": "transformer", "layers": 8, "d_model": 2048, "ffn": 8192, "heads": 16, "seq": 2048,
                "vocab": 32000, "dtype": "bf16", "attention": "fused"}},
      "training": {{"batch": 16, "microbatches": 8, "optimizer": "adam", "bytes_per_param": 18,
                   "data_parallel_sharding": "{}"}},
      "pipeline": {{"stages": 2, "schedule": "interleaved", "chunks": 2, "recompute": "none", "tensor_parallel": 2,
                   "sequence_parallel": true, "partition": "megatron"}},
      "cluster": {{"device": "H100-SXM", "devices": 16, "gpus_per_node": {}, "link": "nvlink4",
                  "inter_node_link": "ib-ndr", "placement": "tp-cp-dp-pp"}}}})",
                            sharding, gpus_per_node));
  };
  std::map<std::string, std::vector<double>> peaks_of;
  for (const char* sharding : {"none", "optimizer", "full"}) {
    SCOPED_TRACE(sharding);
    const cost::Config c = config(sharding, 4);
    ASSERT_EQ(c.Replicas(), 4);
    auto plan = PlanFromConfig(c);
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_EQ(plan->partition.cells.size(), 4u);
    // Each cell's peak, computed on the config itself.
    const auto peaks = cost::StagePeaks(plan->schedule, c.pipeline.recompute);
    const auto cut = cost::CutBytes(c.model);
    const cost::StaticBytesRule rule = cost::StaticBytesOf(c, c.GradientRanks());
    for (size_t st = 0; st < plan->partition.cells.size(); ++st) {
      const auto& cell = plan->partition.cells[st];
      const cost::MemoryInputs in{c.training.bytes_per_param, static_cast<double>(c.training.MicroBatchSize()),
                                  &peaks[st], &rule};
      const double expected =
          cost::CellPeakMemory(c.model, cut, cell.first_layer, cell.last_layer, c.pipeline.checkpointing, in)
              .total_bytes;
      EXPECT_NEAR(cell.peak_memory_bytes, expected, 1e-9 * expected) << "cell " << st;
      peaks_of[sharding].push_back(cell.peak_memory_bytes);
    }
  }
  for (size_t st = 0; st < peaks_of["none"].size(); ++st) {
    EXPECT_LT(peaks_of["optimizer"][st], peaks_of["none"][st]) << "cell " << st;
    EXPECT_LT(peaks_of["full"][st], peaks_of["optimizer"][st]) << "cell " << st;
  }
  // Nodes of 4 GPUs: device 0's GPUs (2 x 4 replicas) fill nodes 0 and 1,
  // device 1's nodes 2 and 3, so every cut between devices crosses nodes;
  // in one node of 16 it does not. Without sharding nothing else changes.
  auto split = PlanFromConfig(config("none", 4)), together = PlanFromConfig(config("none", 16));
  ASSERT_TRUE(split && together);
  for (size_t st = 0; st + 1 < split->partition.cells.size(); ++st) {
    const auto &a = split->partition.cells[st], &b = together->partition.cells[st];
    ASSERT_EQ(a.first_layer, b.first_layer);
    ASSERT_NE(split->schedule.placement[st], split->schedule.placement[st + 1]);
    EXPECT_GT(a.time_s, b.time_s) << "cell " << st;
  }
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

namespace twinpipe::partition {
namespace {

cost::Config MegatronConfig(int layers, int stages, int chunks, bool embedding, bool loss) {
  auto c = cost::LoadConfig(fmt::format(R"({{
    "model": {{"generator": "transformer", "layers": {}, "d_model": 256, "heads": 4, "seq": 64, "vocab": 1024}},
    "training": {{"batch": 48, "microbatches": 48}},
    "pipeline": {{"stages": {}, "schedule": "{}", "chunks": {}, "partition": "megatron",
                  "account_for_embedding": {}, "account_for_loss": {}}},
    "cluster": {{"device": "H100-SXM"}}}})", layers, stages, chunks > 1 ? "interleaved" : "1f1b", chunks, embedding,
                                        loss),
                            "megatron.json");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

// Megatron-Core's layouts, worked by hand: each cell's first layer (0 the
// embedding, 1..L the blocks, L + 1 the head).
TEST(Megatron, LaysOutBlocksEmbeddingAndLossAsMegatronCoreDoes) {
  // Llama 3 70B's 80 blocks on 4 ranks of 5 virtual stages: 4 blocks a cell.
  auto firsts = MegatronFirstLayers(MegatronConfig(80, 4, 5, false, false), 20);
  ASSERT_TRUE(firsts) << firsts.error().message;
  std::vector<int> even{0};
  for (int k = 1; k < 20; ++k) even.push_back(1 + 4 * k);
  EXPECT_EQ(*firsts, even);
  // Both counted: 82 units over 20 cells, the first two take 5: cell 0 the
  // embedding and blocks 1-4, cell 1 blocks 5-9, then 4 each; the last
  // cell three blocks and the head.
  firsts = MegatronFirstLayers(MegatronConfig(80, 4, 5, true, true), 20);
  ASSERT_TRUE(firsts);
  EXPECT_EQ((*firsts)[1], 5);
  EXPECT_EQ((*firsts)[2], 10);
  EXPECT_EQ((*firsts)[19], 78);  // blocks 78, 79, 80 and the head
  // Llama 3.1 405B's 126 blocks on 16 ranks of 8 virtual stages with both
  // counted (Megatron-Core's recipe): 128 units, one a cell; the first cell
  // holds the embedding alone, the last the head alone.
  firsts = MegatronFirstLayers(MegatronConfig(126, 16, 8, true, true), 128);
  ASSERT_TRUE(firsts);
  EXPECT_EQ((*firsts)[1], 1);
  EXPECT_EQ((*firsts)[127], 127);
  // Six ranks (not a power of two) of 7 blocks that do not divide: 2, 1, 1, 1, 1, 1.
  firsts = MegatronFirstLayers(MegatronConfig(7, 6, 1, false, false), 6);
  ASSERT_TRUE(firsts);
  EXPECT_EQ(*firsts, (std::vector<int>{0, 3, 4, 5, 6, 7}));
  // Too few blocks for the cells.
  auto few = MegatronFirstLayers(MegatronConfig(6, 4, 2, false, false), 8);
  ASSERT_FALSE(few);
  EXPECT_EQ(few.error().message, "megatron.json: /pipeline/partition: 8 cells but only 6 blocks to share");
}

TEST(Megatron, PlansTwentyVirtualStages) {
  cost::Config c = MegatronConfig(80, 4, 20, false, false);
  auto plan = PlanFromConfig(c);
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->partition.cells.size(), 80u);
  EXPECT_EQ(plan->partition.cells[0].first_layer, 0);
  EXPECT_EQ(plan->partition.cells[0].last_layer, 1);   // the embedding and block 1
  EXPECT_EQ(plan->partition.cells[79].last_layer, 81);  // block 80 and the head
}

// The data-parallel reduction moves the kept gradients at their precision
// (/training/gradient_dtype: Megatron-LM's fp32 in bf16 training by default),
// while the distributed optimizer gathers the weights at theirs (BF16, or
// FP8 with fp8_params): ALLREDUCE's bytes are the gradient's, and the
// gather a fraction of them.
TEST(PlanBytes, TheGradientsReduceAtTheirPrecisionAndTheWeightsGatherAtTheirs) {
  struct Case {
    std::string dtype, training;
    double gradient_bytes, weight_bytes;
  };
  for (const Case& k : std::vector<Case>{{"bf16", "", 4, 2},
                                         {"bf16", R"(, "gradient_dtype": "bf16")", 2, 2},
                                         {"fp16", "", 2, 2},
                                         {"fp16", R"(, "gradient_dtype": "fp32")", 4, 2},
                                         {"fp8", R"(, "fp8_params": true)", 4, 1},
                                         {"fp8", R"(, "fp8_params": true, "gradient_dtype": "bf16")", 2, 1}}) {
    SCOPED_TRACE(k.dtype + k.training);
    const cost::Config c = Load(fmt::format(R"({{"model": {{"generator": "transformer", "layers": 4, "d_model": 256,
      "heads": 8, "seq": 128, "vocab": 1024, "dtype": "{}"}},
      "training": {{"batch": 8, "microbatches": 4, "data_parallel_sharding": "optimizer"{}}},
      "pipeline": {{"stages": 2, "schedule": "1f1b"}},
      "cluster": {{"device": "H100-SXM", "devices": 8}}}})", k.dtype, k.training));
    auto plan = PlanFromConfig(c);
    ASSERT_TRUE(plan) << plan.error().message;
    const cost::PlanCosts costs = cost::CostsFromPlan(c, *plan);
    int reductions = 0;
    for (const auto& program : plan->schedule.programs) {
      for (const ir::Op& op : program) {
        if (op.kind != ir::OpKind::kAllReduce) continue;
        ++reductions;
        const double params = plan->partition.cells[op.stage].params;
        EXPECT_EQ(op.bytes, static_cast<int64_t>(params * k.gradient_bytes));
        EXPECT_DOUBLE_EQ(static_cast<double>(op.bytes) * costs.gather_fraction, params * k.weight_bytes);
      }
    }
    EXPECT_EQ(reductions, 2);
  }
}

// Fully sharded: each cell's weights gathered at their precision beside
// its forward and backward, its gradients reduce-scattered at theirs
// beside the weight gradient, the last layer's share showing
// (t = max(compute, comm) + comm / layers, plan_costs.cc), against the same
// plan unsharded.
TEST(PlanBytes, FullShardingScattersTheGradientsAtTheirPrecision) {
  for (const auto& [training, gradient_bytes, weight_bytes] : std::vector<std::tuple<std::string, double, double>>{
           {"", 4, 2}, {R"(, "gradient_dtype": "bf16")", 2, 2}}) {
    SCOPED_TRACE(training);
    auto config = [&](const std::string& sharding) {
      return Load(fmt::format(R"({{"model": {{"generator": "transformer", "layers": 4, "d_model": 256,
        "heads": 8, "seq": 128, "vocab": 1024, "dtype": "bf16"}},
        "training": {{"batch": 8, "microbatches": 4, "data_parallel_sharding": "{}"{}}},
        "pipeline": {{"stages": 2, "schedule": "1f1b"}},
        "cluster": {{"device": "H100-SXM", "devices": 32, "gpus_per_node": 8, "inter_node_link": "ib-ndr"}}}})",
                              sharding, training));
    };
    const cost::Config full = config("full"), none = config("none");
    auto plan = PlanFromConfig(full);
    ASSERT_TRUE(plan) << plan.error().message;
    const cost::PlanCosts sharded = cost::CostsFromPlan(full, *plan), plain = cost::CostsFromPlan(none, *plan);
    // 16 replicas of each stage, over the nodes the plan's placement gives.
    ASSERT_EQ(sharded.gradient_ranks, 16);
    const cost::Link& nv = *cost::FindLink("nvlink4");
    const cost::Link& ib = *cost::FindLink("ib-ndr");
    for (int st = 0; st < 2; ++st) {
      const auto& cell = plan->partition.cells[st];
      const double layers = cell.last_layer - cell.first_layer + 1;
      const cost::CollectiveGroup group{.ranks = 16, .nodes = static_cast<double>(sharded.replica_nodes),
                                        .intra = &nv, .inter = &ib};
      const double scatter = cost::CollectiveTime(cost::Kernel::Collective::kReduceScatter,
                                                  cell.params * gradient_bytes, group);
      const double gather =
          cost::CollectiveTime(cost::Kernel::Collective::kAllGather, cell.params * weight_bytes, group);
      const auto slot = [&](const cost::PlanCosts& c, ir::OpKind k) { return c.compute_s[st][cost::ComputeSlot(k)]; };
      const double w = slot(plain, ir::OpKind::kBackwardWeight), f = slot(plain, ir::OpKind::kForward);
      EXPECT_DOUBLE_EQ(slot(sharded, ir::OpKind::kBackwardWeight), std::max(w, scatter) + scatter / layers);
      EXPECT_DOUBLE_EQ(slot(sharded, ir::OpKind::kForward), std::max(f, gather) + gather / layers);
    }
  }
}

// FP8 under delayed scaling: each chunk's forward ends, and its backward
// (its input gradients) ends, with an all-reduce of the amaxes of its FP8
// GEMMs over the stage's tensor, context and data-parallel group: 3 floats
// a linear forward, 2 backward, 4 linears a block (QKV, projection, FC1,
// FC2). Replicas change nothing else of a stage's op times, so between 8
// replicas and 1 (t = c = 2) the ops differ by the collective over 32 GPUs
// less that over 4, each over the nodes its GPUs are on (listed GPU by
// GPU), and by the wait for the group's slowest tensor-parallel group: each
// drifts by drift x sqrt(t) over the t seconds of work since the last
// meeting (a split backward's B counts its W, which runs before the next),
// and 16 groups (c x replicas) meet ExpectedMaxOfNormals(16) standard
// deviations late where 2 meet ExpectedMaxOfNormals(2); W and BF16 by
// nothing.
TEST(PlanCosts, Fp8StagesReduceTheirAmaxesOverTheirWholeGroup) {
  auto config = [](const std::string& dtype, int replicas) {
    return Load(fmt::format(R"({{"model": {{"generator": "transformer", "layers": 4, "d_model": 256,
      "heads": 8, "seq": 256, "vocab": 1024, "dtype": "{}", "attention": "fused"}},
      "training": {{"batch": {}, "microbatches": 4}},
      "pipeline": {{"stages": 2, "schedule": "1f1b", "tensor_parallel": 2, "context_parallel": 2}},
      "cluster": {{"device": "H100-SXM", "devices": {}, "gpus_per_node": 8, "inter_node_link": "ib-ndr"}}}})",
                            dtype, 4 * replicas, 8 * replicas));
  };
  const cost::Link& nv = *cost::FindLink("nvlink4");
  const cost::Link& ib = *cost::FindLink("ib-ndr");
  for (const std::string dtype : {"fp8", "bf16"}) {
    SCOPED_TRACE(dtype);
    const cost::Config wide = config(dtype, 8), narrow = config(dtype, 1);
    auto plan = PlanFromConfig(wide);
    auto narrow_plan = PlanFromConfig(narrow);
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(narrow_plan) << narrow_plan.error().message;
    ASSERT_EQ(plan->schedule.replicas, 8);
    ASSERT_EQ(narrow_plan->schedule.replicas, 1);
    const cost::PlanCosts costs = cost::CostsFromPlan(wide, *plan);
    const cost::PlanCosts reference = cost::CostsFromPlan(narrow, *narrow_plan);
    for (int st = 0; st < 2; ++st) {
      const auto& cell = plan->partition.cells[st];
      ASSERT_EQ(cell.first_layer, narrow_plan->partition.cells[st].first_layer);
      ASSERT_EQ(cell.last_layer, narrow_plan->partition.cells[st].last_layer);
      int blocks = 0;
      for (int i = cell.first_layer; i <= cell.last_layer; ++i) {
        blocks += wide.model.layers[i].kind == "transformer_block";
      }
      ASSERT_GT(blocks, 0);
      auto group = [&](const cost::Config& c, int replicas) {
        std::set<int64_t> nodes;
        for (int r = 0; r < replicas; ++r) {
          for (int j = 0; j < 2; ++j) {
            for (int tt = 0; tt < 2; ++tt) nodes.insert((c.GpuOf(j, plan->schedule.placement[st], r) + tt) / 8);
          }
        }
        return cost::CollectiveGroup{.ranks = 4.0 * replicas, .nodes = static_cast<double>(nodes.size()),
                                     .intra = &nv, .inter = &ib};
      };
      const auto slot = [&](const cost::PlanCosts& c, ir::OpKind k) { return c.compute_s[st][cost::ComputeSlot(k)]; };
      const double drift = cost::FindDevice("H100-SXM")->drift;
      ASSERT_GT(drift, 0);
      // The narrow op's time is t + reduce(4 GPUs) + late(2 groups) sqrt(t +
      // after): u = sqrt(t + after) solves a quadratic; the wide op adds the
      // differences.
      auto amax = [&](double bytes, ir::OpKind kind) {
        if (dtype != "fp8") return 0.0;
        const double after = kind == ir::OpKind::kBackwardInput ? slot(reference, ir::OpKind::kBackwardWeight) : 0;
        const double narrow_reduce =
            cost::CollectiveTime(cost::Kernel::Collective::kAllReduce, bytes, group(narrow, 1));
        const double late_narrow = drift * cost::ExpectedMaxOfNormals(2),
                     late_wide = drift * cost::ExpectedMaxOfNormals(16);
        const double root_t = (-late_narrow + std::sqrt(late_narrow * late_narrow +
                                                        4 * (slot(reference, kind) - narrow_reduce + after))) /
                              2;
        return cost::CollectiveTime(cost::Kernel::Collective::kAllReduce, bytes, group(wide, 8)) - narrow_reduce +
               (late_wide - late_narrow) * root_t;
      };
      const double forward = amax(12.0 * 4 * blocks, ir::OpKind::kForward),
                   backward = amax(8.0 * 4 * blocks, ir::OpKind::kBackward),
                   backward_input = amax(8.0 * 4 * blocks, ir::OpKind::kBackwardInput);
      EXPECT_NEAR(slot(costs, ir::OpKind::kForward) - slot(reference, ir::OpKind::kForward), forward, 1e-15);
      EXPECT_NEAR(slot(costs, ir::OpKind::kBackward) - slot(reference, ir::OpKind::kBackward), backward, 1e-15);
      EXPECT_NEAR(slot(costs, ir::OpKind::kBackwardInput) - slot(reference, ir::OpKind::kBackwardInput),
                  backward_input, 1e-15);
      EXPECT_EQ(slot(costs, ir::OpKind::kBackwardWeight), slot(reference, ir::OpKind::kBackwardWeight));
      if (dtype == "fp8") {
        EXPECT_GT(group(wide, 8).nodes, 1);
        EXPECT_GT(forward, 5e-6);  // more nodes, more latency
      }
    }
  }
}

// The expected largest of n standard normals: the closed forms for n <= 5
// (1/sqrt(pi), 3/(2 sqrt(pi)), 6 arctan(sqrt 2)/pi^(3/2), 5/(4 sqrt(pi)) +
// 15 arcsin(1/3)/(2 pi^(3/2))), and draws for larger groups.
TEST(PlanCosts, ExpectedMaxOfNormalsMatchesClosedFormsAndDraws) {
  const double pi = std::numbers::pi;
  EXPECT_EQ(cost::ExpectedMaxOfNormals(1), 0);
  EXPECT_NEAR(cost::ExpectedMaxOfNormals(2), 1 / std::sqrt(pi), 1e-9);
  EXPECT_NEAR(cost::ExpectedMaxOfNormals(3), 3 / (2 * std::sqrt(pi)), 1e-9);
  EXPECT_NEAR(cost::ExpectedMaxOfNormals(4), 6 * std::atan(std::sqrt(2.0)) / std::pow(pi, 1.5), 1e-9);
  EXPECT_NEAR(cost::ExpectedMaxOfNormals(5),
              5 / (4 * std::sqrt(pi)) + 15 * std::asin(1.0 / 3) / (2 * std::pow(pi, 1.5)), 1e-9);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  for (const int n : {16, 256, 4096}) {
    SCOPED_TRACE(n);
    constexpr int kDraws = 4000;
    double sum = 0, sum2 = 0;
    for (int d = 0; d < kDraws; ++d) {
      double best = -1e300;
      for (int i = 0; i < n; ++i) best = std::max(best, normal(rng));
      sum += best;
      sum2 += best * best;
    }
    const double mean = sum / kDraws, stderr_mean = std::sqrt((sum2 / kDraws - mean * mean) / kDraws);
    EXPECT_NEAR(cost::ExpectedMaxOfNormals(n), mean, 4 * stderr_mean);
  }
  // It grows with the group, below sqrt(2 ln n).
  EXPECT_LT(cost::ExpectedMaxOfNormals(64), cost::ExpectedMaxOfNormals(65));
  EXPECT_LT(cost::ExpectedMaxOfNormals(1e5), std::sqrt(2 * std::log(1e5)));
}

TEST(Megatron, KeysNameTheirPath) {
  auto c = cost::LoadConfig(R"({"model": {"generator": "mlp", "layers": 4, "width": 8, "input": 4, "classes": 2},
    "training": {"batch": 4, "microbatches": 4}, "pipeline": {"stages": 2, "partition": "megatron"},
    "cluster": {"device": "CPU"}})", "m.json");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("m.json: /pipeline/partition: the megatron partition splits a generated "
                                   "transformer's blocks"), std::string::npos) << c.error().message;
  c = cost::LoadConfig(R"({"model": {"generator": "transformer", "layers": 4, "d_model": 64, "heads": 4, "seq": 8,
    "vocab": 64}, "training": {"batch": 4, "microbatches": 4},
    "pipeline": {"stages": 2, "account_for_loss": true}, "cluster": {"device": "CPU"}})", "m.json");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("m.json: /pipeline/account_for_loss: only the megatron partition"),
            std::string::npos) << c.error().message;
}

}  // namespace
}  // namespace twinpipe::partition
