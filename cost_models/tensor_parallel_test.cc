// Tensor and sequence parallelism and selective recompute in the transformer
// cost model, against Megatron-LM's structure and Korthikanti et al.'s
// closed forms (2022, "Reducing Activation Recomputation in Large
// Transformer Models", Table 2), and the config's validation.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "cost_models/compute_model.h"
#include "cost_models/config.h"
#include "cost_models/generators.h"

namespace twinpipe::cost {
namespace {

TransformerSpec Spec(int t, bool sp, bool selective) {
  return {.layers = 2, .d_model = 1024, .ffn = 4096, .heads = 16, .seq = 512, .vocab = 32000, .dtype = Dtype::kFp16,
          .tensor_parallel = t, .sequence_parallel = sp, .selective_recompute = selective};
}

double PassFlops(const Layer& l, Kernel::Pass pass) {
  double f = 0;
  for (const Kernel& k : l.kernels) f += k.pass == pass ? k.Flops() : 0;
  return f;
}

TEST(TensorParallel, FlopsAndWeightsDivideByT) {
  const Model one = GenerateTransformer(Spec(1, false, false));
  for (int t : {2, 4, 8}) {
    for (bool sp : {false, true}) {
      const Model m = GenerateTransformer(Spec(t, sp, false));
      ASSERT_EQ(m.layers.size(), one.layers.size());
      for (size_t i = 1; i < m.layers.size(); ++i) {  // blocks and head: every GEMM splits
        SCOPED_TRACE(fmt::format("t={} sp={} {}", t, sp, m.layers[i].name));
        EXPECT_DOUBLE_EQ(m.layers[i].fwd_flops, one.layers[i].fwd_flops / t);
        EXPECT_DOUBLE_EQ(m.layers[i].bwd_input_flops, one.layers[i].bwd_input_flops / t);
        EXPECT_DOUBLE_EQ(m.layers[i].bwd_weight_flops, one.layers[i].bwd_weight_flops / t);
        // The kernels add up to the layer's FLOPs.
        EXPECT_DOUBLE_EQ(PassFlops(m.layers[i], Kernel::Pass::kForward), m.layers[i].fwd_flops);
        EXPECT_DOUBLE_EQ(PassFlops(m.layers[i], Kernel::Pass::kInput), m.layers[i].bwd_input_flops);
      }
      // A block's weights: the four GEMMs and the column-parallel biases
      // split; the row-parallel biases and the layernorms are replicated.
      const double d = 1024, f = 4096;
      EXPECT_DOUBLE_EQ(m.layers[1].params, (4 * d * d + 2 * d * f + 3 * d + f) / t + 6 * d);
    }
  }
}

int Count(const Layer& l, Kernel::Pass pass, Kernel::Collective kind) {
  int n = 0;
  for (const Kernel& k : l.kernels) n += k.pass == pass && k.collective == kind;
  return n;
}

// Megatron's block: 2 all-reduces in forward, 2 in backward, of S x d
// elements; with sequence parallelism each becomes a reduce-scatter and an
// all-gather (Korthikanti et al., section 4.2.2). None at t = 1.
TEST(TensorParallel, ABlockHasMegatronsCollectives) {
  using C = Kernel::Collective;
  using P = Kernel::Pass;
  for (int t : {1, 2, 8}) {
    for (bool sp : {false, true}) {
      if (sp && t == 1) continue;
      const Layer block = GenerateTransformer(Spec(t, sp, false)).layers[1];
      SCOPED_TRACE(fmt::format("t={} sp={}", t, sp));
      const int ar = t > 1 && !sp ? 2 : 0, rs = t > 1 && sp ? 2 : 0, ag = rs;
      for (P pass : {P::kForward, P::kInput}) {
        EXPECT_EQ(Count(block, pass, C::kAllReduce), ar);
        EXPECT_EQ(Count(block, pass, C::kReduceScatter), rs);
        EXPECT_EQ(Count(block, pass, C::kAllGather), ag);
      }
      // Sequence parallel: QKV's and FC1's inputs are kept as shards and
      // gathered again for their weight gradients.
      EXPECT_EQ(Count(block, P::kWeight, C::kAllReduce), 0);
      EXPECT_EQ(Count(block, P::kWeight, C::kAllGather), sp ? 2 : 0);
      for (const Kernel& k : block.kernels) {
        if (k.collective == C::kNone) continue;
        EXPECT_DOUBLE_EQ(k.bytes, 512.0 * 1024 * 2) << k.name;
        EXPECT_DOUBLE_EQ(k.group, t) << k.name;
      }
      // The head: the vocabulary-parallel cross-entropy all-reduces three
      // rows of S fp32 scalars in forward; the logits GEMM is column-parallel.
      const Layer head = GenerateTransformer(Spec(t, sp, false)).layers.back();
      int scalars = 0;
      for (const Kernel& k : head.kernels) scalars += k.collective == C::kAllReduce && k.bytes == 512.0 * 4;
      EXPECT_EQ(scalars, t > 1 ? 3 : 0);
      EXPECT_EQ(Count(head, P::kForward, C::kAllGather), sp ? 1 : 0);
      EXPECT_EQ(Count(head, P::kInput, C::kAllReduce) + Count(head, P::kInput, C::kReduceScatter), t > 1 ? 1 : 0);
      EXPECT_EQ(Count(head, P::kWeight, C::kAllGather), sp ? 1 : 0);
    }
  }
}

// Activations per block (Korthikanti et al., Table 2; s b h units of 16-bit
// values, a = heads, s = seq, h = d_model).
TEST(TensorParallel, StashFollowsKorthikanti) {
  const double s = 512, h = 1024, a = 16;
  for (int t : {1, 2, 4, 8}) {
    for (bool sp : {false, true}) {
      if (sp && t == 1) continue;
      for (bool selective : {false, true}) {
        const double scores = selective ? 0 : 5 * a * s / (h * t);
        const double units = t == 1 ? 34 + scores : sp ? 34.0 / t + scores : 10 + 24.0 / t + scores;
        const Layer block = GenerateTransformer(Spec(t, sp, selective)).layers[1];
        EXPECT_DOUBLE_EQ(block.stash_bytes, s * h * units) << "t=" << t << " sp=" << sp << " selective=" << selective;
      }
    }
  }
}

// Selective recompute re-runs the attention core (QK^T, softmax, dropout,
// times V) inside the input backward: 4 s^2 h / t more FLOPs.
TEST(TensorParallel, SelectiveRecomputeAddsTheAttentionCoreToTheBackward) {
  for (int t : {1, 4}) {
    const Layer plain = GenerateTransformer(Spec(t, t > 1, false)).layers[1];
    const Layer selective = GenerateTransformer(Spec(t, t > 1, true)).layers[1];
    EXPECT_DOUBLE_EQ(selective.bwd_input_flops - plain.bwd_input_flops, 4.0 * 512 * 512 * 1024 / t);
    EXPECT_DOUBLE_EQ(selective.fwd_flops, plain.fwd_flops);
  }
}

// A Llama-style block (4 K/V heads of 16, SwiGLU, RMSNorm, RoPE, no biases,
// fused causal attention) under Megatron's tensor parallelism: every GEMM,
// the attention and the K/V heads divide by t; the norms' scales are
// replicated; the collectives are GPT's; Korthikanti's tensor-parallel
// activations (all but the norms' inputs and dropout masks, 10 S d) divide.
TEST(TensorParallel, LlamaBlocksDivideAsMegatronDivides) {
  using C = Kernel::Collective;
  using P = Kernel::Pass;
  const double S = 512, d = 1024, f = 2816, kv = 256;
  auto spec = [](int t, bool sp, bool selective) {
    return TransformerSpec{.layers = 2, .d_model = 1024, .ffn = 2816, .heads = 16, .seq = 512, .vocab = 32000,
                           .causal = true, .dtype = Dtype::kBf16, .kv_heads = 4, .mlp = MlpKind::kSwiglu,
                           .norm = NormKind::kRmsNorm, .position = PositionKind::kRope, .bias = false,
                           .attention = AttentionKind::kFused, .tensor_parallel = t, .sequence_parallel = sp,
                           .selective_recompute = selective};
  };
  const Model one = GenerateTransformer(spec(1, false, false));
  for (int t : {2, 4}) {
    for (bool sp : {false, true}) {
      const Model m = GenerateTransformer(spec(t, sp, false));
      for (size_t i = 1; i < m.layers.size(); ++i) {
        SCOPED_TRACE(fmt::format("t={} sp={} {}", t, sp, m.layers[i].name));
        EXPECT_DOUBLE_EQ(m.layers[i].fwd_flops, one.layers[i].fwd_flops / t);
        EXPECT_DOUBLE_EQ(m.layers[i].bwd_input_flops, one.layers[i].bwd_input_flops / t);
        EXPECT_DOUBLE_EQ(m.layers[i].bwd_weight_flops, one.layers[i].bwd_weight_flops / t);
        EXPECT_DOUBLE_EQ(PassFlops(m.layers[i], P::kForward), m.layers[i].fwd_flops);
        EXPECT_DOUBLE_EQ(PassFlops(m.layers[i], P::kInput), m.layers[i].bwd_input_flops);
      }
      const Layer& block = m.layers[1];
      EXPECT_DOUBLE_EQ(block.params, (d * d + 2 * d * kv + d * d + 3 * d * f) / t + 2 * d);
      for (P pass : {P::kForward, P::kInput}) {
        EXPECT_EQ(Count(block, pass, C::kAllReduce), sp ? 0 : 2);
        EXPECT_EQ(Count(block, pass, C::kReduceScatter), sp ? 2 : 0);
      }
      for (const Kernel& k : block.kernels) {
        if (k.name == "rope") {
          EXPECT_DOUBLE_EQ(k.bytes, 2 * S * (d + kv) / t * 2);
        }
        if (k.name == "swiglu") {
          EXPECT_DOUBLE_EQ(k.bytes, 3 * S * f / t * 2);
        }
      }
      // 16-bit units of S d: norms' inputs 4, dropout masks 2, QKV's and
      // FFN-up's inputs 2 each replicated (or split by sequence parallelism);
      // split: Q 2, K and V 2 kv/d each, the projection's input 2, and
      // SwiGLU's gate and up (4 f/d) and their product, FFN-down's input (2 f/d).
      const double split = 2 + 4 * kv / d + 2 + 6 * f / d;
      const double units = sp ? (10 + split) / t : 10 + split / t;
      EXPECT_NEAR(block.stash_bytes, S * d * units, 1e-9 * block.stash_bytes) << "t=" << t << " sp=" << sp;
      // Selective recompute re-runs the fused kernel's forward: 2 x 2 S (S/2) d / t.
      const Layer selective = GenerateTransformer(spec(t, sp, true)).layers[1];
      EXPECT_DOUBLE_EQ(selective.bwd_input_flops - block.bwd_input_flops, 2 * 2 * S * (S / 2) * d / t);
      EXPECT_DOUBLE_EQ(selective.stash_bytes, block.stash_bytes);
    }
  }
}

TEST(TensorParallel, RingCollectiveTime) {
  const Link link{.name = "l", .latency_s = 1e-6, .bandwidth = 100e9, .collective_efficiency = 0.5};
  const double bytes = 64e6;
  EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kAllReduce, bytes, 8, link),
                   2 * (7.0 / 8 * bytes / 50e9 + 7 * 1e-6));
  EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kAllGather, bytes, 8, link), 7.0 / 8 * bytes / 50e9 + 7e-6);
  EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kAllReduce, bytes, 1, link), 0);
  // A block's forward on 8 GPUs costs its kernels plus its two all-reduces
  // (a micro-batch large enough that the kernels, not their launches, bound it).
  const Layer block = GenerateTransformer(Spec(8, false, false)).layers[1];
  const Device& h100 = *FindDevice("H100-SXM");
  const double b = 256;
  const double with = LayerOpTime(block, ir::OpKind::kForward, h100, Dtype::kFp16, 0.8, b, &link);
  const double without = LayerOpTime(block, ir::OpKind::kForward, h100, Dtype::kFp16, 0.8, b, nullptr);
  EXPECT_NEAR(with - without, 2 * CollectiveTime(Kernel::Collective::kAllReduce, b * 512 * 1024 * 2, 8, link), 1e-12);
}

Result<Config> Load(const std::string& pipeline, const std::string& cluster, const std::string& generator = "transformer") {
  const std::string model = generator == "transformer"
                                ? R"("generator": "transformer", "layers": 8, "d_model": 512, "ffn": 2048, "heads": 8, "seq": 128, "vocab": 1024)"
                                : R"("generator": "mlp", "layers": 8, "width": 64, "input": 32, "classes": 8)";
  return LoadConfig(fmt::format(R"({{"model": {{{}}}, "training": {{"batch": 16, "microbatches": 4}},
                                    "pipeline": {{"stages": 2, {}}}, "cluster": {{"device": "A100-80GB", {}}}}})",
                                model, pipeline, cluster),
                    "tp.json");
}

TEST(TensorParallel, ConfigPlacesGroupsAndNamesWhatIsWrong) {
  auto ok = Load(R"("tensor_parallel": 4, "sequence_parallel": true, "recompute": "selective")",
                 R"("devices": 16, "gpus_per_node": 8, "link": "nvlink3")");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->Replicas(), 2);  // 16 GPUs = 4 x 2 stages x 2 replicas
  EXPECT_EQ(ok->cluster.inter_node_link.name, "ib-hdr");
  EXPECT_EQ(ok->model.layers[1].stash_bytes, GenerateTransformer({.layers = 8, .d_model = 512, .ffn = 2048, .heads = 8,
                                                                   .seq = 128, .vocab = 1024, .tensor_parallel = 4,
                                                                   .sequence_parallel = true,
                                                                   .selective_recompute = true}).layers[1].stash_bytes);
  auto defaults = Load(R"("tensor_parallel": 2)", R"("link": "nvlink3")");
  ASSERT_TRUE(defaults) << defaults.error().message;
  EXPECT_EQ(defaults->cluster.NumDevices(), 4);  // t x K
  EXPECT_FALSE(defaults->pipeline.blocking_p2p);
  auto blocking = Load(R"("p2p": "blocking")", R"("devices": 2)");
  ASSERT_TRUE(blocking) << blocking.error().message;
  EXPECT_TRUE(blocking->pipeline.blocking_p2p);
  EXPECT_EQ(defaults->pipeline.recompute_timing, ir::RecomputeTiming::kOverlapped);
  auto megatron = Load(R"("recompute_timing": "in-backward")", R"("devices": 2)");
  ASSERT_TRUE(megatron) << megatron.error().message;
  EXPECT_EQ(megatron->pipeline.recompute_timing, ir::RecomputeTiming::kInBackward);
  struct Bad { std::string pipeline, cluster, generator, expect; };
  for (const Bad& b : std::vector<Bad>{
           {R"("tensor_parallel": 3)", R"("devices": 6)", "transformer", "/pipeline/tensor_parallel: 3 GPUs do not divide the 8 heads"},
           {R"("tensor_parallel": 8)", R"("devices": 16, "gpus_per_node": 4)", "transformer",
            "/pipeline/tensor_parallel: a tensor-parallel group of 8 GPUs must fit inside one node"},
           {R"("tensor_parallel": 2)", R"("devices": 6)", "transformer",
            "/cluster/devices: 6 devices are not a whole number of pipelines of 2 stages x 2 tensor-parallel GPUs"},
           {R"("sequence_parallel": true)", R"("devices": 2)", "transformer", "/pipeline/sequence_parallel: sequence parallelism"},
           {R"("tensor_parallel": 2)", R"("devices": 4)", "mlp", "/pipeline/tensor_parallel: tensor parallelism"},
           {R"("recompute": "selective")", R"("devices": 2)", "mlp", "/pipeline/recompute: tensor parallelism"},
           {R"("p2p": "sync")", R"("devices": 2)", "transformer", "/pipeline/p2p: 'sync' is not one of overlapped, blocking"},
           {R"("recompute_timing": "early")", R"("devices": 2)", "transformer",
            "/pipeline/recompute_timing: 'early' is not one of overlapped, in-backward"}}) {
    auto r = Load(b.pipeline, b.cluster, b.generator);
    ASSERT_FALSE(r) << b.expect;
    EXPECT_NE(r.error().message.find("tp.json: " + b.expect), std::string::npos) << r.error().message;
  }
}

// NCCL's all-reduce across nodes: a ring pays 2 (n - 1) latencies, a tree
// 2 (ranks per node - 1) intra-node and 2 log2(nodes) inter-node ones but
// moves the bytes at 0.9 of the bus bandwidth, twice. The faster is taken.
TEST(Collectives, AllReduceAcrossNodesTakesTheFasterOfRingAndTree) {
  const Link nvlink{.name = "nv", .latency_s = 2e-6, .bandwidth = 200e9, .collective_efficiency = 0.8};
  const Link ib{.name = "ib", .latency_s = 10e-6, .bandwidth = 25e9, .collective_efficiency = 0.8};
  const CollectiveGroup group{.ranks = 1024, .nodes = 128, .intra = &nvlink, .inter = &ib};
  // A link of no contention kind given (per pair): one rail, 20 GB/s.
  const double bus = 20e9;
  auto ring = [&](double bytes) { return 2 * (1023.0 / 1024 * bytes / bus + 896 * 2e-6 + 127 * 10e-6); };
  auto tree = [&](double bytes) { return 2 * bytes / (0.9 * bus) + 2 * (7 * 2e-6 + 7 * 10e-6); };
  // Small buffer: latency-bound, the tree wins.
  EXPECT_LT(tree(1e6), ring(1e6));
  EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kAllReduce, 1e6, group), tree(1e6));
  // Large buffer: bandwidth-bound, the ring wins.
  EXPECT_LT(ring(16e9), tree(16e9));
  EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kAllReduce, 16e9, group), ring(16e9));
  // Inside one node the tree is a chain: never faster than the ring.
  for (double bytes : {1e3, 1e6, 1e9}) {
    EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kAllReduce, bytes, 8, nvlink),
                     2 * (7.0 / 8 * bytes / (200e9 * 0.8) + 7 * 2e-6));
  }
  // Gathers and scatters are rings only.
  EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kAllGather, 1e6, group),
                   1023.0 / 1024 * 1e6 / bus + 896 * 2e-6 + 127 * 10e-6);
}

// Across nodes a ring crosses on a rail per GPU of the group in a node
// (NCCL runs a channel per NIC; with 8 NDR NICs two DGX H100s reach about
// 470 GB/s of all-reduce bus bandwidth, a NIC 46-48 GB/s: NVIDIA/nccl issue
// 2409, nccl-tests issue 290): the group's ranks per node x the inter-node
// link, up to the intra-node link's rate. One rank a node: one rail.
TEST(Collectives, ARingCrossesNodesOnARailPerGpuOfItsGroup) {
  const Link nvlink{.name = "nv", .latency_s = 0, .bandwidth = 450e9, .collective_efficiency = 0.8};
  const Link ib{.name = "ib", .latency_s = 0, .bandwidth = 50e9, .contention = Contention::kPerDevice,
                .collective_efficiency = 0.8};
  const double bytes = 8e9;
  for (const auto& [ranks, nodes, bus] : std::vector<std::tuple<double, double, double>>{
           {16, 2, 320e9},    // 8 rails of 40 GB/s, under NVLink's 360
           {16, 16, 40e9},    // a rank a node: one rail
           {4, 2, 80e9},      // two a node (tensor parallelism 4 in nodes of 8): two rails
           {128, 8, 360e9}}) {  // 16 a node would cross at 640: NVLink's 360 bounds it
    SCOPED_TRACE(fmt::format("{} ranks on {} nodes", ranks, nodes));
    const CollectiveGroup group{.ranks = ranks, .nodes = nodes, .intra = &nvlink, .inter = &ib};
    EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kReduceScatter, bytes, group), (ranks - 1) / ranks * bytes / bus);
    EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kAllGather, bytes, group), (ranks - 1) / ranks * bytes / bus);
  }
  // A link shared through a host, or a ring of point-to-point sends (the
  // context-parallel K/V exchange), crosses on one rail.
  Link staged = ib;
  staged.contention = Contention::kHost;
  EXPECT_DOUBLE_EQ(
      CollectiveTime(Kernel::Collective::kAllGather, bytes, {.ranks = 16, .nodes = 2, .intra = &nvlink, .inter = &staged}),
      15.0 / 16 * bytes / 40e9);
  EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kAllGather, bytes,
                                  {.ranks = 16, .nodes = 2, .intra = &nvlink, .inter = &ib, .rails = false}),
                   15.0 / 16 * bytes / 40e9);
  // Never faster than the same ranks inside one node.
  EXPECT_GE(CollectiveTime(Kernel::Collective::kAllGather, bytes, {.ranks = 16, .nodes = 2, .intra = &nvlink, .inter = &ib}),
            CollectiveTime(Kernel::Collective::kAllGather, bytes, 16, nvlink));
}

// NCCL's fixed cost is paid once per collective, ring or tree, whatever its
// size; across nodes the larger of the two links' is taken.
TEST(Collectives, AFixedCostOncePerCollective) {
  Link nvlink{.name = "nv", .latency_s = 2e-6, .bandwidth = 200e9, .collective_efficiency = 0.8};
  Link ib{.name = "ib", .latency_s = 10e-6, .bandwidth = 25e9, .collective_efficiency = 0.8};
  const CollectiveGroup group{.ranks = 1024, .nodes = 128, .intra = &nvlink, .inter = &ib};
  std::vector<double> before;
  for (double bytes : {0.0, 1e6, 4e9}) {
    for (auto kind : {Kernel::Collective::kAllReduce, Kernel::Collective::kAllGather}) {
      before.push_back(CollectiveTime(kind, bytes, group));
      before.push_back(CollectiveTime(kind, bytes, 8, nvlink));
    }
  }
  nvlink.collective_latency_s = 40e-6;
  ib.collective_latency_s = 25e-6;
  std::size_t i = 0;
  for (double bytes : {0.0, 1e6, 4e9}) {
    for (auto kind : {Kernel::Collective::kAllReduce, Kernel::Collective::kAllGather}) {
      EXPECT_DOUBLE_EQ(CollectiveTime(kind, bytes, group), before[i++] + 40e-6) << bytes;
      EXPECT_DOUBLE_EQ(CollectiveTime(kind, bytes, 8, nvlink), before[i++] + 40e-6) << bytes;
    }
  }
  ib.collective_latency_s = 60e-6;
  EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kAllReduce, 1e6, group), before[4] + 60e-6);
  // A group of one runs no collective.
  EXPECT_EQ(CollectiveTime(Kernel::Collective::kAllReduce, 1e6, 1, nvlink), 0);
}

// The catalogue's NVLink3 against NCCL's all_reduce_perf on one A100 node
// (vTrain's tables, traces/published/vtrain-a100/nccl_allreduce_a100.csv):
// 2 to 8 GPUs, 1 to 64 MiB, the sizes a tensor-parallel all-reduce has.
TEST(Collectives, NvLink3AllReduceMatchesNcclOnAnA100Node) {
  const Link& nvlink = *FindLink("nvlink3");
  std::ifstream in(std::string(TWINPIPE_SOURCE_DIR) + "/traces/published/vtrain-a100/nccl_allreduce_a100.csv");
  ASSERT_TRUE(in) << "nccl_allreduce_a100.csv";
  std::string line;
  std::getline(in, line);
  double sum = 0, worst = 0;
  int rows = 0;
  while (std::getline(in, line)) {
    int ranks = 0;
    double bytes = 0, out_us = 0, in_us = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "%d,%lf,%lf,%lf", &ranks, &bytes, &out_us, &in_us), 4) << line;
    const double measured = (out_us + in_us) / 2 * 1e-6;
    const double err = CollectiveTime(Kernel::Collective::kAllReduce, bytes, ranks, nvlink) / measured - 1;
    sum += std::abs(err);
    worst = std::max(worst, std::abs(err));
    ++rows;
  }
  EXPECT_EQ(rows, 7 * 64);
  EXPECT_LT(sum / rows, 0.10);
  EXPECT_LT(worst, 0.30);
  // Without the fixed cost the small all-reduces are far off.
  Link bare = nvlink;
  bare.collective_latency_s = 0;
  EXPECT_LT(CollectiveTime(Kernel::Collective::kAllReduce, 1 << 21, 2, bare), 0.5 * 52.3e-6);
}

}  // namespace
}  // namespace twinpipe::cost
