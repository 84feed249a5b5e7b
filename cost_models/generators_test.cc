#include "cost_models/generators.h"

#include <gtest/gtest.h>

namespace twinpipe::cost {
namespace {

double Sum(const Model& m, double Layer::*field) {
  double s = 0;
  for (const auto& l : m.layers) s += l.*field;
  return s;
}

TEST(Transformer, Gpt2SmallParameterCount) {
  // GPT-2 small: 124,439,808 parameters with the output head tied to the
  // token embedding. Our head is untied, adding d x V weights and V biases.
  const Model m = GenerateTransformer(
      {.layers = 12, .d_model = 768, .ffn = 3072, .heads = 12, .seq = 1024, .vocab = 50257});
  ASSERT_EQ(m.layers.size(), 14u);
  EXPECT_DOUBLE_EQ(Sum(m, &Layer::params), 124439808.0 + 768.0 * 50257 + 50257);
  EXPECT_DOUBLE_EQ(m.layers[1].params, 7087872.0);  // one GPT-2 block
}

TEST(Transformer, BlockFlopsInClosedForm) {
  const double S = 128, d = 256, f = 1024, V = 1000;
  const Model m = GenerateTransformer({.layers = 2, .d_model = 256, .ffn = 1024, .heads = 8, .seq = 128, .vocab = 1000});
  const Layer& b = m.layers[1];
  // Q, K, V and output projections: 4 matmuls of (S x d)(d x d); scores and
  // weighted values: 2 matmuls of (S x d)(d x S); MLP: (S x d)(d x f), (S x f)(f x d).
  const double projections = 4 * 2 * S * d * d, attention = 2 * 2 * S * S * d, mlp = 2 * 2 * S * d * f;
  EXPECT_DOUBLE_EQ(b.fwd_flops, projections + attention + mlp);
  EXPECT_DOUBLE_EQ(b.bwd_weight_flops, projections + mlp);
  EXPECT_DOUBLE_EQ(b.bwd_input_flops, projections + 2 * attention + mlp);
  EXPECT_DOUBLE_EQ(b.bwd_input_flops + b.bwd_weight_flops, 2 * b.fwd_flops);  // backward = 2x forward
  EXPECT_DOUBLE_EQ(m.layers.back().fwd_flops, 2 * S * d * V);
  EXPECT_DOUBLE_EQ(b.out_bytes, S * d * 4);
  // Korthikanti et al.: S d (34 + 5 h S / d) bytes at 16 bits, doubled for fp32.
  EXPECT_DOUBLE_EQ(b.stash_bytes, S * d * (34 + 5 * 8 * S / d) * 2);
}

TEST(Mlp, LayersAndCounts) {
  const Model m = GenerateMlp({.layers = 6, .width = 64, .input = 32, .classes = 8, .norm = Norm::kLayerNorm});
  ASSERT_EQ(m.layers.size(), 6u);
  EXPECT_DOUBLE_EQ(m.layers[0].params, 32 * 64 + 64);
  EXPECT_DOUBLE_EQ(m.layers[1].params, 64 * 64 + 64 + 2 * 64);
  EXPECT_DOUBLE_EQ(m.layers[5].params, 64 * 8 + 8);
  EXPECT_DOUBLE_EQ(m.layers[3].fwd_flops, 2 * 64 * 64);
  EXPECT_DOUBLE_EQ(m.input_bytes, 32 * 4);
}

TEST(Cnn, SpatialHalvesAndChannelsDoubleAtReductions) {
  const Model m = GenerateCnn({.layers = 8, .channels = 16, .image = 32, .in_channels = 3, .classes = 10, .reductions = 3});
  ASSERT_EQ(m.layers.size(), 10u);  // stem + 8 blocks + head
  // Stem: 3 -> 16 channels at 32 x 32.
  EXPECT_DOUBLE_EQ(m.layers[0].fwd_flops, 2.0 * 32 * 32 * 3 * 16 * 9);
  EXPECT_DOUBLE_EQ(m.layers[0].params, 3 * 16 * 9 + 2 * 16);
  int reductions = 0;
  double hw = 32, ch = 16;
  for (size_t i = 1; i + 1 < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    const double c_in = ch;
    if (l.name.rfind("reduce", 0) == 0) {
      ++reductions;
      hw /= 2;
      ch *= 2;
    }
    EXPECT_DOUBLE_EQ(l.fwd_flops, 2 * hw * hw * c_in * ch * 9) << l.name;
    EXPECT_DOUBLE_EQ(l.out_bytes, hw * hw * ch * 4) << l.name;
  }
  EXPECT_EQ(reductions, 3);
  EXPECT_EQ(m.layers[3].name, "reduce2");  // evenly spaced: blocks 2, 4, 6
  EXPECT_EQ(m.layers[5].name, "reduce4");
  EXPECT_EQ(m.layers[7].name, "reduce6");
  // Uneven: the largest activation is several times the smallest.
  EXPECT_GE(m.layers[1].out_bytes, 4 * m.layers[8].out_bytes);
}

}  // namespace
}  // namespace twinpipe::cost
