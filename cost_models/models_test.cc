#include <gtest/gtest.h>

#include <random>

#include <fmt/format.h>

#include "cost_models/comm_model.h"
#include "cost_models/compute_model.h"
#include "cost_models/generators.h"
#include "cost_models/memory_model.h"
#include "cost_models/model.h"
#include "ir/builders.h"

namespace twinpipe::cost {
namespace {

TEST(ComputeModel, RooflineWithLaunchOverhead) {
  Device d{.name = "toy", .fp32_flops = 1e12, .tf32_flops = 1e12, .half_flops = 2e12,
           .memory_bandwidth = 1e11, .memory_bytes = 1e10, .launch_overhead_s = 1e-5};
  Layer compute_bound{.fwd_flops = 1e9, .bwd_input_flops = 1e9, .bwd_weight_flops = 1e9,
                      .params = 0, .out_bytes = 100, .stash_bytes = 0};
  // 8 samples x 1e9 FLOPs at 1e12 x 0.5: 16 ms (memory: 800 B, negligible).
  EXPECT_DOUBLE_EQ(LayerOpTime(compute_bound, ir::OpKind::kForward, d, Dtype::kFp32, 0.5, 8), 1e-5 + 0.016);
  EXPECT_DOUBLE_EQ(LayerOpTime(compute_bound, ir::OpKind::kBackward, d, Dtype::kFp32, 0.5, 8), 1e-5 + 0.032);
  EXPECT_DOUBLE_EQ(LayerOpTime(compute_bound, ir::OpKind::kForward, d, Dtype::kBf16, 0.5, 8), 1e-5 + 0.008);
  Layer memory_bound{.fwd_flops = 10, .params = 1e6, .out_bytes = 1e6, .stash_bytes = 1e6};
  // 1e6 params x 4 B + 2 x 1e6 B x 2 samples = 8e6 B at 1e11 B/s = 80 us.
  EXPECT_NEAR(LayerOpTime(memory_bound, ir::OpKind::kForward, d, Dtype::kFp32, 0.5, 2), 1e-5 + 8e-5, 1e-15);
}

TEST(CommModel, AlphaBetaAndHostStaging) {
  Link direct{.name = "d", .latency_s = 1e-5, .bandwidth = 1e10};
  Link staged = direct;
  staged.host_staged = true;
  EXPECT_DOUBLE_EQ(TransferTime(direct, 1e8), 1e-5 + 0.01);
  EXPECT_DOUBLE_EQ(TransferTime(staged, 1e8), 2 * (1e-5 + 0.01));
  EXPECT_DOUBLE_EQ(TransferTime(direct, 0), 1e-5);  // an empty message pays its latency
}

Model Chain() {
  Model m;
  m.input_bytes = 10;
  for (int i = 0; i < 4; ++i) {
    m.layers.push_back(Layer{.name = "l", .params = 100.0 * (i + 1), .out_bytes = 20.0 + i, .stash_bytes = 50});
  }
  return m;
}

// A generated transformer's blocks cost alike (they are timed once); the
// embedding, the head, and a block with any field changed do not.
TEST(ModelLayers, IdenticalBlocksAreTheSameCost) {
  const Model m = GenerateTransformer({.layers = 3, .d_model = 256, .ffn = 1024, .heads = 4, .seq = 64, .vocab = 1000});
  EXPECT_TRUE(SameCosts(m.layers[1], m.layers[2]));
  EXPECT_TRUE(SameCosts(m.layers[2], m.layers[3]));
  EXPECT_FALSE(SameCosts(m.layers[0], m.layers[1]));
  EXPECT_FALSE(SameCosts(m.layers[3], m.layers[4]));
  Layer other = m.layers[2];
  other.name = "renamed";
  other.cost = 7;  // the user's c_i is the partitioner's, not the time's
  EXPECT_TRUE(SameCosts(m.layers[1], other));
  // Kernels are compared by value when they are not the same shared list.
  std::vector<Kernel> kernels(other.kernels.begin(), other.kernels.end());
  other.kernels = kernels;
  EXPECT_FALSE(other.kernels.SharedWith(m.layers[1].kernels));
  EXPECT_TRUE(SameCosts(m.layers[1], other));
  kernels.back().bytes += 1;
  other.kernels = kernels;
  EXPECT_FALSE(SameCosts(m.layers[1], other));
  other = m.layers[2];
  other.stash_bytes += 1;
  EXPECT_FALSE(SameCosts(m.layers[1], other));
}

TEST(CutBytes, ChainIsEachLayersOutput) {
  EXPECT_EQ(CutBytes(Chain()), (std::vector<double>{20, 21, 22}));
}

TEST(CutBytes, SkipConnectionsKeepTensorsLive) {
  Model m = Chain();
  m.edges = {{0, 1}, {1, 2}, {2, 3}, {0, 3}};  // layer 0's output also feeds layer 3
  EXPECT_EQ(CutBytes(m), (std::vector<double>{20, 21 + 20, 22 + 20}));
}

TEST(MemoryModel, RecomputeKeepsOnlyBoundaryInputs) {
  const Model m_chain = Chain();
  const auto cut = CutBytes(m_chain);
  // Cell = layers 1..2: params 200 + 300; stash 50 + 50 per sample; input 20
  // (layer 0's output); output 22. Micro-batch 4, 3 in flight, 12 B/param.
  // One stage, GPipe, 3 micro-batches: all three forwards, then the backwards.
  auto shape = ir::BuildShape("gpipe", 1, 3);
  ASSERT_TRUE(shape);
  const auto none = StagePeaks(*shape, ir::RecomputeMode::kNone), full = StagePeaks(*shape, ir::RecomputeMode::kFull);
  CellMemory m = CellPeakMemory(m_chain, cut, 1, 2, {}, MemoryInputs{12, 4, &none[0]});
  EXPECT_DOUBLE_EQ(m.params_bytes, 500 * 12);
  EXPECT_DOUBLE_EQ(m.activation_bytes, 3 * 100 * 4);
  EXPECT_DOUBLE_EQ(m.boundary_bytes, 2 * (20 + 22) * 4);
  m = CellPeakMemory(m_chain, cut, 1, 2, {}, MemoryInputs{12, 4, &full[0]});
  // Three micro-batches keep their input; the one being recomputed rebuilds
  // the rest of its activations (its input is among the kept bytes).
  EXPECT_DOUBLE_EQ(m.activation_bytes, 3 * 20 * 4 + (100 - 20) * 4);
  EXPECT_DOUBLE_EQ(m.total_bytes, 6000 + 240 + 320 + 336);
}

// Per layer (Megatron's checkpointing), a recomputed micro-batch keeps every
// re-run layer's input, and one layer's activations are rebuilt beside them.
TEST(MemoryModel, LayerRecomputeKeepsEveryLayersInput) {
  Model m = Chain();
  const auto cut = CutBytes(m);  // 20, 21, 22: layer 1's input is 20, layer 2's 21
  const Checkpointing cell, layer{.granularity = RecomputeGranularity::kLayer};
  const CellActivations per_cell = CellActivationsOf(m, cut, 1, 2, cell);
  EXPECT_DOUBLE_EQ(per_cell.kept, 20);
  EXPECT_DOUBLE_EQ(per_cell.rebuilt, 100);  // the whole cell
  CellActivations a = CellActivationsOf(m, cut, 1, 2, layer);
  EXPECT_DOUBLE_EQ(a.stash, 100);
  EXPECT_DOUBLE_EQ(a.kept, 20 + 21);
  EXPECT_DOUBLE_EQ(a.rebuilt, 41 + (50 - 20));  // layer 1 rebuilt beside layer 2's input
  // A layer whose input each of 2 GPUs holds whole keeps it twice over,
  // unless the saved activations are distributed.
  m.layers[2].input_replicas = 2;
  a = CellActivationsOf(m, cut, 1, 2, layer);
  EXPECT_DOUBLE_EQ(a.kept, 20 + 42);
  EXPECT_DOUBLE_EQ(a.rebuilt, 62 + 30);
  a = CellActivationsOf(m, cut, 1, 2,
                        {.granularity = RecomputeGranularity::kLayer, .distribute_saved_activations = true});
  EXPECT_DOUBLE_EQ(a.kept, 41);
  // A head (not re-run) keeps its activations: layers 1..2 keep their
  // inputs, layer 3 its stash.
  m.layers[3].rematerialized = false;
  a = CellActivationsOf(m, cut, 1, 3, layer);
  EXPECT_DOUBLE_EQ(a.kept, 62 + 50);
  EXPECT_DOUBLE_EQ(a.rebuilt, 112 + 30);
  // One stage, GPipe, 3 micro-batches of 4: the last forward's peak is two
  // kept and one rebuilt.
  auto shape = ir::BuildShape("gpipe", 1, 3);
  ASSERT_TRUE(shape);
  const auto full = StagePeaks(*shape, ir::RecomputeMode::kFull);
  const CellMemory c = CellPeakMemory(m, cut, 1, 2, layer, MemoryInputs{12, 4, &full[0]});
  EXPECT_DOUBLE_EQ(c.activation_bytes, (2 * 62 + 92) * 4);
}

TEST(MemoryModel, InFlightFollowsTheSchedule) {
  EXPECT_EQ(InFlightPerStage("gpipe", 4, 8), (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(InFlightPerStage("1f1b", 4, 8), (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(InFlightPerStage("1f1b", 4, 2), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(InFlightPerStage("naive", 3, 8), (std::vector<int>{1, 1, 1}));
}

}  // namespace
}  // namespace twinpipe::cost

namespace twinpipe::cost {
namespace {

// The partitioners' O(1) table equals the cell-by-cell sum for every cell of
// random models (heads that recompute does not re-run among them, layers
// whose input a tensor-parallel group holds whole), every recompute mode
// and granularity, and in-flight count.
TEST(Memory, TableEqualsTheCellSum) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0, 1e6);
  const Checkpointing layer{.granularity = RecomputeGranularity::kLayer};
  const Checkpointing distributed{.granularity = RecomputeGranularity::kLayer, .distribute_saved_activations = true};
  for (int trial = 0; trial < 30; ++trial) {
    Model m;
    m.input_bytes = u(rng);
    const int L = 1 + static_cast<int>(rng() % (trial < 20 ? 12 : 40));
    for (int i = 0; i < L; ++i) {
      Layer l;
      l.params = u(rng), l.out_bytes = u(rng), l.stash_bytes = u(rng);
      l.rematerialized = rng() % 4 != 0;
      l.input_replicas = 1 << (rng() % 3);
      if (i == L - 1 && L > 1 && trial % 2 == 1) {  // the logits read the embedding's table
        l.shares_weights_of = 0;
        l.shared_params = u(rng);
      }
      m.layers.push_back(l);
    }
    const auto cut = CutBytes(m);
    // A rule of the static bytes as sharding makes them (each field adds).
    const StaticBytesRule sharded = [](const CellParams& p) {
      return 2 * p.params + p.expert_params + p.fp8_params + 8 * p.largest_layer;
    };
    for (const Checkpointing& checkpointing : {Checkpointing{}, layer, distributed}) {
      const CellMemoryTable table(m, cut, checkpointing);
      for (auto mode : {ir::RecomputeMode::kNone, ir::RecomputeMode::kFull, ir::RecomputeMode::kExceptLast}) {
        for (const std::string schedule : {"gpipe", "1f1b"}) {
          const auto peaks = StagePeaks(schedule, 2, 3, 0, mode);
          for (const MemoryInputs& in : {MemoryInputs{12, 2, &peaks[0]}, MemoryInputs{12, 2, &peaks[0], &sharded}}) {
            for (int a = 0; a < L; ++a) {
              for (int b = a; b < L; ++b) {
                const CellMemory want = CellPeakMemory(m, cut, a, b, checkpointing, in), got = table.Peak(a, b, in);
                const std::string what = fmt::format("trial {} {} {} cell {}..{}", trial,
                                                     RecomputeGranularityName(checkpointing.granularity),
                                                     ir::RecomputeModeName(mode), a, b);
                EXPECT_NEAR(got.total_bytes, want.total_bytes, 1e-9 * want.total_bytes) << what;
                EXPECT_NEAR(got.activation_bytes, want.activation_bytes, 1e-9 * want.total_bytes) << what;
                // The partitioner's floor: under the peak, and never above
                // a cell's for a cell inside it.
                const double floor = table.Floor(a, b, in);
                EXPECT_LE(floor, got.total_bytes) << what;
                EXPECT_GT(floor, 0) << what;
                if (a < b) {
                  EXPECT_LE(table.Floor(a + 1, b, in), floor) << what;
                  EXPECT_LE(table.Floor(a, b - 1, in), floor) << what;
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace twinpipe::cost
