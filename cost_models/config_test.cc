#include "cost_models/config.h"

#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "ir/builders.h"

namespace twinpipe::cost {
namespace {

const char* kGood = R"({
  "model":    {"generator": "transformer", "layers": 24, "d_model": 1024, "ffn": 4096, "heads": 16, "seq": 512, "vocab": 32000, "dtype": "bf16"},
  "training": {"batch": 128, "microbatches": 16, "optimizer": "adam", "bytes_per_param": 12},
  "pipeline": {"stages": 4, "schedule": "gpipe", "recompute": "full", "partition": "minmax"},
  "cluster":  {"device": "H100-SXM", "devices": 4, "link": "nvlink4"}
})";

TEST(LoadConfig, ReadsTheDesignExample) {
  auto c = LoadConfig(kGood, "q.json");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->model.layers.size(), 26u);
  EXPECT_EQ(c->model.dtype, Dtype::kBf16);
  EXPECT_EQ(c->training.MicroBatchSize(), 8);
  EXPECT_EQ(c->pipeline.stages, 4);
  EXPECT_EQ(c->cluster.NumDevices(), 4);
  EXPECT_EQ(c->cluster.devices[0].name, "H100-SXM");
  EXPECT_EQ(c->cluster.link.name, "nvlink4");
  EXPECT_EQ(c->Replicas(), 1);
}

// Every member but the device list, each set away from its default. The
// structured bindings below name every member of Config and ClusterConfig:
// a member added to either stops this compiling until CopyWithoutDevices
// (and these bindings) name it too.
TEST(Config, CopyWithoutDevicesKeepsEverythingElse) {
  auto c = LoadConfig(R"({
    "model": {"generator": "transformer", "layers": 8, "d_model": 1024, "ffn": 4096, "heads": 16, "kv_heads": 4,
              "seq": 2048, "vocab": 32000, "dtype": "fp8", "mlp": "swiglu", "attention": "fused"},
    "training": {"batch": 64, "microbatches": 16, "optimizer": "adam", "bytes_per_param": 18,
                 "data_parallel_sharding": "optimizer"},
    "pipeline": {"stages": 2, "schedule": "interleaved", "chunks": 2, "recompute": "selective", "tensor_parallel": 2,
                 "sequence_parallel": true, "context_parallel": 2},
    "cluster": {"device": "H100-SXM", "devices": 32, "gpus_per_node": 8, "gpus": 32, "link": "nvlink4",
                "inter_node_link": "ib-ndr", "placement": "tp-cp-dp-pp", "efficiency": 0.7}})",
                      "copy.json");
  ASSERT_TRUE(c) << c.error().message;
  Config copy = CopyWithoutDevices(*c);
  {
    [[maybe_unused]] const auto& [source, generator, transformer, mlp, cnn, model, training, pipeline, cluster,
                                     gpu_layout] = copy;
    [[maybe_unused]] const auto& [devices, link, inter_node_link, gpus_per_node, gpus, rank_order, efficiency] =
        copy.cluster;
  }
  EXPECT_EQ(copy.cluster.NumDevices(), 0);
  EXPECT_EQ(copy.source, c->source);
  EXPECT_EQ(copy.generator, c->generator);
  ASSERT_TRUE(copy.transformer);
  EXPECT_EQ(copy.transformer->kv_heads, 4);
  EXPECT_EQ(copy.model.layers.size(), c->model.layers.size());
  EXPECT_EQ(copy.model.dtype, Dtype::kFp8);
  EXPECT_EQ(copy.training.micro_batches, 16);
  EXPECT_EQ(copy.training.sharding, c->training.sharding);
  EXPECT_EQ(copy.pipeline.schedule, "interleaved");
  EXPECT_EQ(copy.pipeline.context_parallel, 2);
  EXPECT_EQ(copy.cluster.link.name, "nvlink4");
  EXPECT_EQ(copy.cluster.inter_node_link.name, "ib-ndr");
  EXPECT_EQ(copy.cluster.gpus_per_node, 8);
  EXPECT_EQ(copy.cluster.gpus, 32);
  EXPECT_EQ(copy.cluster.rank_order, c->cluster.rank_order);
  EXPECT_NE(copy.cluster.rank_order, RankOrder::kPipelineFirst);
  EXPECT_EQ(copy.cluster.efficiency, 0.7);
  // Its devices given back, it places GPUs as the original does.
  copy.cluster.devices = c->cluster.devices;
  EXPECT_EQ(copy.Replicas(), c->Replicas());
  for (int d = 0; d < c->pipeline.stages; ++d) EXPECT_EQ(copy.GradientNodes(d), c->GradientNodes(d));
  EXPECT_EQ(copy.ContextNodes(), c->ContextNodes());
}

// The gradient group's nodes in closed form (BlockNodes, O(GPUs per node))
// against brute force: every GPU of the group listed and its nodes counted,
// over thousands of random layouts in both rank orders.
TEST(Config, GradientNodesEqualCountingEveryGpu) {
  std::mt19937 rng(7);
  auto pick = [&](std::vector<int> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)]; };
  for (int trial = 0; trial < 3000; ++trial) {
    SCOPED_TRACE(trial);
    Config c;
    c.cluster.gpus_per_node = pick({1, 2, 4, 6, 8, 16});
    std::vector<int> ts;
    for (int t = 1; t <= c.cluster.gpus_per_node; ++t) {
      if (c.cluster.gpus_per_node % t == 0) ts.push_back(t);
    }
    c.pipeline.tensor_parallel = pick(ts);
    c.pipeline.context_parallel = pick({1, 2, 3, 4});
    c.pipeline.stages = pick({1, 2, 3, 4, 6, 8});
    const int replicas = pick({1, 2, 3, 5, 7, 16, 33});
    c.cluster.rank_order = trial % 2 ? RankOrder::kPipelineFirst : RankOrder::kDataFirst;
    c.cluster.devices.resize(static_cast<size_t>(c.pipeline.tensor_parallel) * c.pipeline.context_parallel *
                             c.pipeline.stages * replicas);
    ASSERT_EQ(c.Replicas(), replicas);
    for (int d = 0; d < c.pipeline.stages; ++d) {
      std::set<int64_t> nodes;
      for (int r = 0; r < replicas; ++r) {
        for (int j = 0; j < c.pipeline.context_parallel; ++j) nodes.insert(c.GpuOf(j, d, r) / c.cluster.gpus_per_node);
      }
      EXPECT_EQ(c.GradientNodes(d), static_cast<int>(nodes.size()))
          << "t " << c.pipeline.tensor_parallel << " c " << c.pipeline.context_parallel << " K " << c.pipeline.stages
          << " R " << replicas << " per node " << c.cluster.gpus_per_node << " device " << d;
    }
  }
  // Runs of GPUs one by one, against their listing.
  for (int trial = 0; trial < 3000; ++trial) {
    SCOPED_TRACE(trial);
    const int64_t per_node = pick({1, 3, 4, 8}), step = std::uniform_int_distribution<int64_t>(1, per_node)(rng);
    const int64_t length = pick({1, 2, 3, 5}), span = step * (length - 1);
    const int64_t stride = span + std::uniform_int_distribution<int64_t>(1, 20)(rng);
    const int64_t first = std::uniform_int_distribution<int64_t>(0, 40)(rng), blocks = pick({0, 1, 2, 9, 40});
    std::set<int64_t> nodes;
    for (int64_t r = 0; r < blocks; ++r) {
      for (int64_t x = 0; x < length; ++x) nodes.insert((first + r * stride + x * step) / per_node);
    }
    EXPECT_EQ(BlockNodes(first, stride, blocks, span, per_node), static_cast<int64_t>(nodes.size()));
  }
}

TEST(LoadConfig, ReadsTheBlocksOptionsAndTheirDefaults) {
  auto plain = LoadConfig(kGood, "q.json");
  ASSERT_TRUE(plain) << plain.error().message;
  const TransformerSpec& d = *plain->transformer;
  EXPECT_EQ(d.kv_heads, 16);
  EXPECT_EQ(d.mlp, MlpKind::kGelu);
  EXPECT_EQ(d.norm, NormKind::kLayerNorm);
  EXPECT_EQ(d.position, PositionKind::kLearned);
  EXPECT_TRUE(d.bias);
  EXPECT_FALSE(d.tied_embeddings);
  EXPECT_EQ(d.attention, AttentionKind::kUnfused);
  std::string text = kGood;
  const std::string from = "\"heads\": 16";
  text.replace(text.find(from), from.size(),
               "\"heads\": 16, \"kv_heads\": 4, \"mlp\": \"swiglu\", \"norm\": \"rmsnorm\", \"position\": \"rope\", "
               "\"bias\": false, \"tied_embeddings\": true, \"attention\": \"fused\"");
  const std::string pipeline = "\"partition\": \"minmax\"";
  text.replace(text.find(pipeline), pipeline.size(), pipeline + ", \"tensor_parallel\": 4");
  text.replace(text.find("\"devices\": 4"), 12, "\"devices\": 16");
  auto c = LoadConfig(text, "q.json");
  ASSERT_TRUE(c) << c.error().message;
  const TransformerSpec& t = *c->transformer;
  EXPECT_EQ(t.kv_heads, 4);
  EXPECT_EQ(t.mlp, MlpKind::kSwiglu);
  EXPECT_EQ(t.norm, NormKind::kRmsNorm);
  EXPECT_EQ(t.position, PositionKind::kRope);
  EXPECT_FALSE(t.bias);
  EXPECT_TRUE(t.tied_embeddings);
  EXPECT_EQ(t.attention, AttentionKind::kFused);
  EXPECT_EQ(t.tensor_parallel, 4);
  EXPECT_EQ(c->model.layers[1].params, GenerateTransformer(t).layers[1].params);
  // Every example config loads, the Llama 3 8B one with its 8.03e9 parameters.
  std::ifstream in(std::string(TWINPIPE_SOURCE_DIR) + "/examples/llama3_8b_h100.json");
  ASSERT_TRUE(in);
  const std::string llama((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto l = LoadConfig(llama, "llama3_8b_h100.json");
  ASSERT_TRUE(l) << l.error().message;
  TransformerSpec whole = *l->transformer;
  whole.tensor_parallel = 1;
  whole.sequence_parallel = false;
  double params = 0;
  for (const Layer& layer : GenerateTransformer(whole).layers) params += layer.params;
  EXPECT_DOUBLE_EQ(params, 8030261248.0);
}

TEST(LoadConfig, ExplicitLayersCustomDevicesAndHeterogeneousClusters) {
  auto c = LoadConfig(R"({
    "model": {"layers": [{"name": "a", "fwd_flops": 1e9, "out_bytes": 4096, "cost": 2},
                         {"name": "b", "fwd_flops": 2e9, "params": 1e6, "out_bytes": 2048, "cost": 1},
                         {"name": "c", "fwd_flops": 1e9, "out_bytes": 1024, "cost": 3}]},
    "training": {"batch": 8, "microbatches": 4},
    "pipeline": {"stages": 2, "partition": "manual", "first_layers": [0, 2]},
    "cluster": {"device": ["mine", "V100"], "link": "slow",
                "custom_devices": [{"name": "mine", "fp32_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 1e9,
                                    "comm_on_compute": true, "kernel_floor_s": 3e-6}],
                "custom_links": [{"name": "slow", "latency_s": 1e-4, "bandwidth": 1e9, "contention": "host",
                                  "collective_latency_s": 2e-5}]}
  })", "x.json");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->model.layers[1].bwd_input_flops, 2e9);  // defaults to the forward
  EXPECT_EQ(c->model.layers[1].stash_bytes, 2048);
  EXPECT_EQ(*c->model.layers[2].cost, 3);
  EXPECT_EQ(c->cluster.devices[0].name, "mine");
  EXPECT_EQ(c->cluster.devices[1].name, "V100");
  EXPECT_TRUE(c->cluster.devices[0].comm_on_compute);
  EXPECT_FALSE(c->cluster.devices[1].comm_on_compute);
  EXPECT_EQ(c->cluster.devices[0].kernel_floor_s, 3e-6);
  EXPECT_EQ(c->cluster.link.contention, Contention::kHost);
  EXPECT_EQ(c->cluster.link.collective_latency_s, 2e-5);
  EXPECT_EQ(c->pipeline.first_layers, (std::vector<int>{0, 2}));
}

TEST(LoadConfig, GraphModelsAreLinearisedTopologically) {
  auto c = LoadConfig(R"({
    "model": {"layers": [{"name": "a", "fwd_flops": 1, "out_bytes": 1},
                         {"name": "c", "fwd_flops": 1, "out_bytes": 3},
                         {"name": "b", "fwd_flops": 1, "out_bytes": 2}],
              "edges": [[0, 2], [2, 1], [0, 1]]},
    "training": {"batch": 1, "microbatches": 1},
    "pipeline": {"stages": 1},
    "cluster": {"device": "CPU", "link": "inproc"}
  })", "g.json");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c->model.layers.size(), 3u);
  EXPECT_EQ(c->model.layers[0].name, "a");
  EXPECT_EQ(c->model.layers[1].name, "b");
  EXPECT_EQ(c->model.layers[2].name, "c");
  EXPECT_EQ(CutBytes(c->model), (std::vector<double>{1, 1 + 2}));
}

struct BadConfig {
  std::string patch_from, patch_to;  // a substring of kGood and its replacement
  std::string message;
  std::string patch2_from = "", patch2_to = "";  // optionally a second one
};
void PrintTo(const BadConfig& b, std::ostream* os) { *os << b.patch_to.substr(0, 30); }

class LoadConfigErrors : public ::testing::TestWithParam<BadConfig> {};

TEST_P(LoadConfigErrors, NameTheJsonPathAndWhatWasExpected) {
  std::string text = kGood;
  const auto& b = GetParam();
  const auto at = text.find(b.patch_from);
  ASSERT_NE(at, std::string::npos) << b.patch_from;
  text.replace(at, b.patch_from.size(), b.patch_to);
  if (!b.patch2_from.empty()) {
    const auto at2 = text.find(b.patch2_from);
    ASSERT_NE(at2, std::string::npos) << b.patch2_from;
    text.replace(at2, b.patch2_from.size(), b.patch2_to);
  }
  auto c = LoadConfig(text, "q.json");
  ASSERT_FALSE(c) << "accepted: " << text;
  EXPECT_EQ(c.error().message, b.message);
}

INSTANTIATE_TEST_SUITE_P(
    All, LoadConfigErrors,
    ::testing::Values(
        BadConfig{"\"microbatches\": 16", "\"microbatches\": 7",
                  "q.json: /training/microbatches: 7 micro-batches do not divide the batch of 128 samples"},
        BadConfig{"\"stages\": 4", "\"stages\": 30", "q.json: /pipeline/stages: 30 stages but the model has only 26 layers"},
        BadConfig{"\"devices\": 4", "\"devices\": 2", "q.json: /pipeline/stages: 4 stages but only 2 devices (/cluster/devices)"},
        BadConfig{"\"devices\": 4", "\"devices\": 6",
                  "q.json: /cluster/devices: 6 devices are not a whole number of 4-stage pipelines (data-parallel replicas)"},
        BadConfig{"\"devices\": 4", "\"devices\": 4, \"gpus\": 5",
                  "q.json: /cluster/gpus: expected an integer from 1 to 4, got 5"},
        BadConfig{"\"devices\": 4", "\"devices\": 8, \"gpus\": 2",
                  "q.json: /cluster/gpus: devices sharing a GPU need tensor_parallel and context_parallel 1",
                  "\"partition\": \"minmax\"", "\"partition\": \"minmax\", \"tensor_parallel\": 2"},
        BadConfig{"\"d_model\": 1024", "\"d_model\": -1024", "q.json: /model/d_model: expected an integer from 1 to 16777216, got -1024"},
        BadConfig{"\"d_model\": 1024", "\"d_model\": \"big\"", "q.json: /model/d_model: expected an integer, got \"big\""},
        BadConfig{"\"heads\": 16", "\"heads\": 15", "q.json: /model/heads: 15 heads do not divide d_model 1024"},
        BadConfig{"\"heads\": 16", "\"heads\": 16, \"kv_heads\": 3",
                  "q.json: /model/kv_heads: expected a divisor of the 16 heads (each K/V head serves a whole group of "
                  "query heads), got 3"},
        BadConfig{"\"heads\": 16", "\"heads\": 16, \"kv_heads\": 0",
                  "q.json: /model/kv_heads: expected an integer from 1 to 16777216, got 0"},
        BadConfig{"\"heads\": 16", "\"heads\": 16, \"kv_heads\": 2",
                  "q.json: /model/kv_heads: expected a multiple of tensor_parallel 4 (/pipeline/tensor_parallel: "
                  "each GPU holds whole K/V heads), got 2",
                  "\"partition\": \"minmax\"", "\"partition\": \"minmax\", \"tensor_parallel\": 4"},
        BadConfig{"\"heads\": 16", "\"heads\": 16, \"mlp\": \"relu\"",
                  "q.json: /model/mlp: 'relu' is not one of gelu, swiglu, squared-relu"},
        BadConfig{"\"heads\": 16", "\"heads\": 16, \"norm\": \"batchnorm\"",
                  "q.json: /model/norm: 'batchnorm' is not one of layernorm, rmsnorm"},
        BadConfig{"\"heads\": 16", "\"heads\": 16, \"position\": \"alibi\"",
                  "q.json: /model/position: 'alibi' is not one of learned, rope"},
        BadConfig{"\"heads\": 16", "\"heads\": 16, \"attention\": \"flash\"",
                  "q.json: /model/attention: 'flash' is not one of unfused, fused"},
        BadConfig{"\"heads\": 16", "\"heads\": 16, \"bias\": \"no\"", "q.json: /model/bias: expected true or false, got \"no\""},
        BadConfig{"\"dtype\": \"bf16\"", "\"dtype\": \"fp4\"", "q.json: /model/dtype: 'fp4' is not one of fp32, tf32, fp16, bf16, fp8"},
        BadConfig{"\"optimizer\": \"adam\"", "\"optimiser\": \"adam\"",
                  "q.json: /training/optimiser: unknown key (expected one of batch, bytes_per_param, data_parallel_sharding, "
                  "fp8_params, gradient_dtype, learning_rate, microbatches, momentum, optimizer, seed, steps)"},
        BadConfig{"\"schedule\": \"gpipe\"", "\"schedule\": \"zigzag\"",
                  "q.json: /pipeline/schedule: 'zigzag' is not one of naive, gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v, dualpipev, auto"},
        BadConfig{"\"H100-SXM\"", "\"H300\"",
                  "q.json: /cluster/device: unknown device 'H300': expected one of P100-PCIe, P100-SXM2, V100, "
                  "A100-40GB, A100-80GB, H100-SXM, H100-PCIe, H200, TPUv2, TPUv3, CPU or a custom_devices name"},
        BadConfig{"\"nvlink4\"", "\"nvlink9\"",
                  "q.json: /cluster/link: unknown link 'nvlink9': expected one of pcie3, pcie4, pcie5, "
                  "pcie3-host-staged, pcie4-host-staged, pcie5-host-staged, nvlink1, nvlink2, nvlink3, nvlink4, "
                  "ib-hdr, ib-ndr, roce, tpu-ici, inproc or a custom_links name"},
        BadConfig{"\"nvlink4\"",
                  "\"x\", \"custom_links\": [{\"name\": \"x\", \"latency_s\": 0, \"bandwidth\": 1e9, \"collective_latency_s\": -1}]",
                  "q.json: /cluster/custom_links/0/collective_latency_s: expected a number >= 0 and at most 10, got -1"},
        BadConfig{"\"H100-SXM\"",
                  "\"d\", \"custom_devices\": [{\"name\": \"d\", \"fp32_flops\": 1e12, \"memory_bandwidth\": 1e11, "
                  "\"memory_bytes\": 1e10, \"overlap_interference\": 1.5}]",
                  "q.json: /cluster/custom_devices/0/overlap_interference: expected a number >= 0 and at most 1, got 1.5"},
        BadConfig{"\"H100-SXM\"",
                  "\"d\", \"custom_devices\": [{\"name\": \"d\", \"fp32_flops\": 1e12, \"memory_bandwidth\": 1e11, "
                  "\"memory_bytes\": 1e10, \"epilogue_store\": -0.5}]",
                  "q.json: /cluster/custom_devices/0/epilogue_store: expected a number >= 0 and at most 1, got -0.5"},
        BadConfig{"\"schedule\": \"gpipe\"", "\"schedule\": \"gpipe\", \"first_layers\": [0, 2]",
                  "q.json: /pipeline/first_layers: only the manual partition cuts at the layers given; this config's "
                  "partition is 'minmax' (set /pipeline/partition to \"manual\")"},
        BadConfig{"\"H100-SXM\"",
                  "\"h100-sxm\", \"custom_devices\": [{\"name\": \"H100-SXM\", \"fp32_flops\": 1e12, "
                  "\"memory_bandwidth\": 1e11, \"memory_bytes\": 1e10}]",
                  "q.json: /cluster/custom_devices/0/name: 'H100-SXM' is the catalogue's device: give the custom one a "
                  "name of its own"},
        BadConfig{"\"nvlink4\"",
                  "\"x\", \"custom_links\": [{\"name\": \"x\", \"latency_s\": 0, \"bandwidth\": 1e9}, "
                  "{\"name\": \"x\", \"latency_s\": 1, \"bandwidth\": 1e9}]",
                  "q.json: /cluster/custom_links/1/name: 'x' names an earlier custom link too"},
        BadConfig{"\"H100-SXM\"",
                  "\"\", \"custom_devices\": [{\"name\": \"\", \"fp32_flops\": 1e12, "
                  "\"memory_bandwidth\": 1e11, \"memory_bytes\": 1e10}]",
                  "q.json: /cluster/custom_devices/0/name: expected a non-empty name for the custom device"},
        BadConfig{"\"nvlink4\"",
                  "\"NVLink4\", \"custom_links\": [{\"name\": \"NVLink4\", \"latency_s\": 0, \"bandwidth\": 1e9}]",
                  "q.json: /cluster/custom_links/0/name: 'NVLink4' is the catalogue's link: give the custom one a name "
                  "of its own"},
        BadConfig{"\"bytes_per_param\": 12", "\"bytes_per_param\": -12",
                  "q.json: /training/bytes_per_param: expected a number >= 0 and at most 1024, got -12"},
        BadConfig{"\"partition\": \"minmax\"", "\"partition\": \"manual\"",
                  "q.json: /pipeline/first_layers: partition 'manual' needs the first layer of each cell"},
        BadConfig{"\"schedule\": \"gpipe\"", "\"schedule\": \"interleaved\", \"chunks\": 1",
                  "q.json: /pipeline/chunks: interleaved needs at least 2 chunks per device, got 1 (with 1 it is 1f1b)"},
        BadConfig{"\"schedule\": \"gpipe\"", "\"schedule\": \"zb-v\", \"chunks\": 3",
                  "q.json: /pipeline/chunks: schedule 'zb-v' places 2 chunks per device, not 3"},
        BadConfig{"\"partition\": \"minmax\"", "\"partition\": \"best\"",
                  "q.json: /pipeline/partition: 'best' is not one of gpipe, minmax, memory, manual, megatron"},
        BadConfig{"\"cluster\":", "\"clusters\":",
                  "q.json: /clusters: unknown key (expected one of cluster, model, pipeline, training)"},
        BadConfig{"\"batch\": 128, ", "", "q.json: /training: missing key 'batch' (an integer from 1 to 1099511627776)"},
        BadConfig{"\"vocab\": 32000, \"dtype\": \"bf16\"}", "\"vocab\": 32000, \"dtype\": \"bf16\"",
                  "q.json: not valid JSON: [json.exception.parse_error.101] parse error at line 6, column 2: "
                  "syntax error while parsing object - unexpected end of input; expected '}'"}));

// The loader takes a schedule's shape exactly where its builder builds it,
// and where it does not, says the builder's reason at the field at fault.
TEST(LoadConfig, AcceptsExactlyTheShapesTheBuildersBuild) {
  int accepted = 0, refused = 0;
  for (const std::string& name : ir::ScheduleNames()) {
    for (int K = 1; K <= 5; ++K) {
      for (int M = 1; M <= 12; ++M) {
        for (int v : {0, 1, 2, 3, 4}) {  // 0: no "chunks" key
          const std::string text = fmt::format(
              R"({{"model": {{"generator": "mlp", "layers": 24, "width": 8, "input": 4, "classes": 2}},
                  "training": {{"batch": {}, "microbatches": {}}},
                  "pipeline": {{"stages": {}, "schedule": "{}"{}}}, "cluster": {{"device": "CPU"}}}})",
              M, M, K, name, v ? fmt::format(", \"chunks\": {}", v) : "");
          SCOPED_TRACE(text);
          auto config = LoadConfig(text, "grid.json");
          auto built = ir::BuildShape(name, K, M, v);
          ASSERT_EQ(config.has_value(), built.has_value()) << (config ? built.error() : config.error()).message;
          if (built) {
            ++accepted;
            continue;
          }
          ++refused;
          const std::string& message = config.error().message;
          const std::string field = built.error().message.find("micro-batches") != std::string::npos
                                        ? "/training/microbatches" : "/pipeline/chunks";
          EXPECT_EQ(message, fmt::format("grid.json: {}: {}", field, built.error().message));
        }
      }
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

// The partition algorithms' names are the README's: its table under
// `twinpipe partition` lists each, in the table's order, and each name
// parses back into its algorithm.
TEST(PartitionAlgorithm, NamesAreTheReadmesAndRoundTrip) {
  std::ifstream in(std::string(TWINPIPE_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in);
  std::vector<std::string> documented;
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "| algorithm | what it does |") {
      in_table = true;
    } else if (in_table && line.starts_with("| `")) {
      documented.push_back(line.substr(3, line.find('`', 3) - 3));
    } else if (in_table && !line.starts_with("|---")) {
      break;
    }
  }
  std::vector<std::string> names;
  for (const auto& [name, algorithm] : kPartitionAlgorithmNames) {
    names.emplace_back(name);
    EXPECT_EQ(PartitionAlgorithmFromName(name), algorithm);
    EXPECT_EQ(PartitionAlgorithmName(algorithm), name);
  }
  EXPECT_EQ(names, documented);
  EXPECT_FALSE(PartitionAlgorithmFromName("best"));
  EXPECT_FALSE(PartitionAlgorithmFromName("MinMax"));
}

TEST(LoadConfig, ReadsThePartitionAlgorithm) {
  std::string text = kGood;
  text.replace(text.find("\"minmax\""), 8, "\"memory\"");
  auto memory = LoadConfig(text, "q.json");
  ASSERT_TRUE(memory) << memory.error().message;
  EXPECT_EQ(memory->pipeline.partition, PartitionAlgorithm::kMemory);
  const std::string given = ", \"partition\": \"memory\"";
  text.replace(text.find(given), given.size(), "");
  auto absent = LoadConfig(text, "q.json");
  ASSERT_TRUE(absent) << absent.error().message;
  EXPECT_EQ(absent->pipeline.partition, PartitionAlgorithm::kMinMax);  // the default
}

// /pipeline/recompute_granularity and /pipeline/distribute_saved_activations:
// defaults, the values read, and each bad value named at its path.
TEST(LoadConfig, ReadsTheRecomputeGranularity) {
  auto with = [](const std::string& keys) {
    std::string text = kGood;
    const std::string at = "\"partition\": \"minmax\"";
    text.replace(text.find(at), at.size(), at + keys);
    text.replace(text.find("\"devices\": 4"), 12, "\"devices\": 16");  // room for t = 4
    return LoadConfig(text, "q.json");
  };
  auto plain = LoadConfig(kGood, "q.json");
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(plain->pipeline.checkpointing, Checkpointing{});
  EXPECT_EQ(plain->pipeline.checkpointing.granularity, RecomputeGranularity::kCell);
  auto layer = with(", \"recompute_granularity\": \"layer\", \"tensor_parallel\": 4, "
                    "\"distribute_saved_activations\": true");
  ASSERT_TRUE(layer) << layer.error().message;
  EXPECT_EQ(layer->pipeline.checkpointing.granularity, RecomputeGranularity::kLayer);
  EXPECT_TRUE(layer->pipeline.checkpointing.distribute_saved_activations);
  for (const auto& [keys, message] : std::vector<std::pair<std::string, std::string>>{
           {", \"recompute_granularity\": \"block\"",
            "q.json: /pipeline/recompute_granularity: 'block' is not one of cell, layer"},
           {", \"recompute_granularity\": 1",
            "q.json: /pipeline/recompute_granularity: expected a string, got 1"},
           {", \"recompute_granularity\": \"layer\", \"tensor_parallel\": 4, \"distribute_saved_activations\": 1",
            "q.json: /pipeline/distribute_saved_activations: expected true or false, got 1"},
           {", \"tensor_parallel\": 4, \"distribute_saved_activations\": true",
            "q.json: /pipeline/distribute_saved_activations: distributes the inputs each layer keeps: it needs "
            "recompute_granularity 'layer'"},
           {", \"recompute_granularity\": \"layer\", \"distribute_saved_activations\": true",
            "q.json: /pipeline/distribute_saved_activations: distributes over the tensor-parallel group: it needs "
            "tensor_parallel > 1"},
           {", \"recompute_granularity\": \"layer\", \"tensor_parallel\": 4, \"sequence_parallel\": true, "
            "\"distribute_saved_activations\": true",
            "q.json: /pipeline/distribute_saved_activations: sequence parallelism already splits the inputs each "
            "layer keeps over the tensor-parallel group: set one of them false"}}) {
    auto c = with(keys);
    ASSERT_FALSE(c) << keys;
    EXPECT_EQ(c.error().message, message) << keys;
  }
  EXPECT_EQ(RecomputeGranularityName(RecomputeGranularity::kLayer), "layer");
  EXPECT_EQ(RecomputeGranularityFromName("cell"), RecomputeGranularity::kCell);
}

TEST(LoadConfig, RejectsCyclicGraphs) {
  auto c = LoadConfig(R"({
    "model": {"layers": [{"fwd_flops": 1, "out_bytes": 1}, {"fwd_flops": 1, "out_bytes": 1}],
              "edges": [[1, 0], [0, 1]]},
    "training": {"batch": 1, "microbatches": 1}, "pipeline": {"stages": 1}, "cluster": {"device": "CPU"}})",
                      "cyc.json");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message, "cyc.json: /model/edges: the layer graph has a cycle; expected a directed acyclic graph");
}

// An edge given twice would carry its bytes across a cut twice.
TEST(LoadConfig, RejectsAnEdgeGivenTwice) {
  const std::string text = R"({
    "model": {"layers": [{"name": "a", "fwd_flops": 1, "out_bytes": 1}, {"name": "b", "fwd_flops": 1, "out_bytes": 1},
                         {"name": "c", "fwd_flops": 1, "out_bytes": 1}],
              "edges": [[0, 1], [1, 2], [0, 2]]},
    "training": {"batch": 1, "microbatches": 1}, "pipeline": {"stages": 1}, "cluster": {"device": "CPU"}})";
  ASSERT_TRUE(LoadConfig(text, "g.json"));
  std::string twice = text;
  twice.replace(twice.find("[0, 2]]"), 7, "[0, 2], [1, 2]]");
  auto edge = LoadConfig(twice, "g.json");
  ASSERT_FALSE(edge);
  EXPECT_EQ(edge.error().message, "g.json: /model/edges/3: [1, 2] is /model/edges/1 again");
}

TEST(LoadConfig, CostsForAllLayersOrNone) {
  auto c = LoadConfig(R"({
    "model": {"layers": [{"fwd_flops": 1, "out_bytes": 1, "cost": 1}, {"fwd_flops": 1, "out_bytes": 1}]},
    "training": {"batch": 1, "microbatches": 1}, "pipeline": {"stages": 1}, "cluster": {"device": "CPU"}})",
                      "c.json");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message, "c.json: /model/layers/1: missing 'cost': give a cost for every layer or for none");
}

}  // namespace
}  // namespace twinpipe::cost
