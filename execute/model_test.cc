// The cost model describes what the executor computes: per layer, the
// parameters, the output bytes and the GEMM FLOPs of forward, input-gradient
// and weight-gradient passes (counted by the GEMM wrapper) are the
// generator's closed forms times the micro-batch.
#include "execute/model.h"

#include <gtest/gtest.h>

#include <random>

#include <fmt/format.h>

#include "execute/gemm.h"

namespace twinpipe::execute {
namespace {

cost::Config Load(const std::string& model) {
  auto c = cost::LoadConfig(R"({"model": )" + model + R"(, "training": {"batch": 4, "microbatches": 1},
    "pipeline": {"stages": 1}, "cluster": {"device": "CPU", "devices": 1, "link": "inproc"}})",
                            "m.json");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

// `flops`: false where the executor computes more than the cost model's
// kernels do (fused causal attention computes the causal half of the scores;
// the executor computes them unfused, the same numbers).
void CheckLayerByLayer(const cost::Config& c, bool gemm_free_first, bool flops = true) {
  const int B = 3;
  const auto layers = BuildLayers(c, 0, static_cast<int>(c.model.layers.size()) - 1);
  ASSERT_EQ(layers.size(), c.model.layers.size());
  MemoryAccount account;
  SyntheticTask task(c);
  const auto batch = task.Make(0);
  Tensor x(&account, B, task.input_cols());
  std::copy_n(batch.inputs.data(), static_cast<size_t>(B) * task.input_cols(), x.data());
  std::mt19937_64 rng(4);
  std::normal_distribution<float> n(0.f, 1.f);
  for (size_t i = 0; i < layers.size(); ++i) {
    const cost::Layer& want = c.model.layers[i];
    SCOPED_TRACE(want.name);
    EXPECT_EQ(static_cast<double>(ParameterCount(*layers[i])), want.params);
    Saved saved;
    ResetGemmFlops();
    Tensor y = layers[i]->Forward(x, saved, Mode::kTrain);
    const int64_t forward = GemmFlops();
    Tensor dy(&account, y.rows(), y.cols());
    for (int k = 0; k < y.rows() * y.cols(); ++k) dy.data()[k] = n(rng);
    ResetGemmFlops();
    layers[i]->BackwardInput(dy, saved);
    const int64_t input = GemmFlops();
    ResetGemmFlops();
    layers[i]->BackwardWeight(saved);
    const int64_t weight = GemmFlops();
    if (i == 0 && gemm_free_first) {  // the embedding: lookups and adds, no GEMM
      EXPECT_EQ(forward + input + weight, 0);
    } else if (flops) {
      EXPECT_EQ(forward, want.fwd_flops * B);
      EXPECT_EQ(input, want.bwd_input_flops * B);
      EXPECT_EQ(weight, want.bwd_weight_flops * B);
    }
    if (i + 1 < layers.size()) {
      EXPECT_EQ(static_cast<double>(y.bytes()), want.out_bytes * B);
    }
    x = std::move(y);
  }
}

TEST(ModelMatchesCostModel, Transformer) {
  CheckLayerByLayer(Load(R"({"generator": "transformer", "layers": 3, "d_model": 16, "ffn": 40, "heads": 4,
                             "seq": 6, "vocab": 13})"), true);
}

// Blocks as built now (issue 36): grouped-query attention, swiglu, rmsnorm,
// rotary positions and no biases (Llama's), untied and tied; squared ReLU
// with biases and learned positions; fused attention (parameters and bytes:
// the executor computes it unfused).
TEST(ModelMatchesCostModel, LlamaClassTransformers) {
  const std::string llama = R"("generator": "transformer", "layers": 3, "d_model": 16, "ffn": 24, "heads": 4,
      "kv_heads": 2, "seq": 6, "vocab": 13, "causal": true, "mlp": "swiglu", "norm": "rmsnorm", "position": "rope",
      "bias": false)";
  for (const char* tied : {"false", "true"}) {
    SCOPED_TRACE(fmt::format("tied_embeddings {}", tied));
    CheckLayerByLayer(Load(fmt::format(R"({{{}, "tied_embeddings": {}}})", llama, tied)), true);
  }
  CheckLayerByLayer(Load(R"({"generator": "transformer", "layers": 2, "d_model": 16, "ffn": 40, "heads": 4,
                             "kv_heads": 1, "seq": 6, "vocab": 13, "mlp": "squared-relu"})"), true);
  CheckLayerByLayer(Load("{" + llama + R"(, "attention": "fused"})"), true, /*flops=*/false);
}

// The executed model's parameters, layer by layer, are the generator's for a
// Llama-class spec (kv_heads < heads, swiglu, rmsnorm, rope, no bias),
// untied and tied (the head's copy of the token table is the embedding's).
TEST(ModelMatchesCostModel, LlamaClassParametersPerLayer) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const cost::TransformerSpec spec{.layers = 2, .d_model = 32, .ffn = 88, .heads = 8, .seq = 4, .vocab = 50,
                                     .causal = true, .kv_heads = 2, .mlp = cost::MlpKind::kSwiglu,
                                     .norm = cost::NormKind::kRmsNorm, .position = cost::PositionKind::kRope,
                                     .bias = false, .tied_embeddings = tied};
    const cost::Model want = cost::GenerateTransformer(spec);
    cost::Config c;
    c.transformer = spec;
    c.model = want;
    const auto layers = BuildLayers(c, 0, spec.layers + 1);
    ASSERT_EQ(layers.size(), want.layers.size());
    int64_t total = 0;
    for (size_t i = 0; i < layers.size(); ++i) {
      EXPECT_EQ(static_cast<double>(ParameterCount(*layers[i])), want.layers[i].params) << want.layers[i].name;
      total += ParameterCount(*layers[i]);
    }
    // By hand: embedding V d; a block d (d + 2 kv) + d^2 + 3 d f + 2 d (kv = d g / h = 8); head d (+ d V untied).
    const int64_t d = 32, f = 88, V = 50, kv = 8;
    EXPECT_EQ(total, V * d + 2 * (d * (d + 2 * kv) + d * d + 3 * d * f + 2 * d) + d + (tied ? 0 : d * V));
  }
}

TEST(ModelMatchesCostModel, Cnn) {
  // The head's pooling adds (side^2 x channels per sample) are no GEMM: the
  // check holds the head's GEMMs to its FLOPs less those.
  const cost::Config c = Load(R"({"generator": "cnn", "layers": 4, "channels": 4, "image": 8, "in_channels": 3,
                                 "classes": 5, "reductions": 2})");
  const auto convs = cost::CnnConvs(*c.cnn);
  const double pooling = double(convs.back().out_side()) * convs.back().out_side() * convs.back().out_channels;
  cost::Config gemm_only = c;
  gemm_only.model.layers.back().fwd_flops -= pooling;
  gemm_only.model.layers.back().bwd_input_flops -= pooling;
  CheckLayerByLayer(gemm_only, false);
}

TEST(ModelMatchesCostModel, Mlp) {
  CheckLayerByLayer(Load(R"({"generator": "mlp", "layers": 4, "width": 12, "input": 5, "classes": 3,
                             "norm": "layernorm", "residual": true})"), false);
}

// OpenBLAS's pre-AVX2 cores on a CPU with AVX2 or AVX-512 are named with the
// core to take instead; any core with AVX2 kernels, or a CPU without AVX2,
// is left alone; and this machine's note, where there is one, names both.
TEST(Blas, APreAvx2CoreOnAWiderCpuIsNamed) {
  EXPECT_EQ(BetterBlasCore("Prescott", true, true), "SkylakeX");
  EXPECT_EQ(BetterBlasCore("prescott", true, false), "Haswell");
  EXPECT_EQ(BetterBlasCore("Sandybridge", true, false), "Haswell");
  EXPECT_EQ(BetterBlasCore("Nehalem", false, false), "");
  for (const char* fine : {"Haswell", "SkylakeX", "Cooperlake", "SapphireRapids", "Zen", "ARMV8", ""}) {
    EXPECT_EQ(BetterBlasCore(fine, true, true), "") << fine;
  }
  const std::string note = BlasCoreNote();
  if (!note.empty()) {
    EXPECT_NE(note.find("OPENBLAS_CORETYPE="), std::string::npos) << note;
    EXPECT_NE(note.find("OpenBLAS took its "), std::string::npos) << note;
  }
}

}  // namespace
}  // namespace twinpipe::execute
