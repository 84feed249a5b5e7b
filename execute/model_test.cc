// The cost model describes what the executor computes: per layer, the
// parameters, the output bytes and the GEMM FLOPs of forward, input-gradient
// and weight-gradient passes (counted by the GEMM wrapper) are the
// generator's closed forms times the micro-batch.
#include "execute/model.h"

#include <gtest/gtest.h>

#include <random>

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

void CheckLayerByLayer(const cost::Config& c, bool gemm_free_first) {
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
    double params = 0;
    for (Param* p : layers[i]->Params()) params += static_cast<double>(p->value.size());
    EXPECT_EQ(params, want.params);
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
    } else {
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

}  // namespace
}  // namespace twinpipe::execute
