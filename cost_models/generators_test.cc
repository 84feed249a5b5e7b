#include "cost_models/generators.h"
#include "cost_models/model_test_util.h"

#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace twinpipe::cost {
namespace {

using testing::Find;
using testing::PassFlops;
using testing::Sum;

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

// Blocks as built now. The closed forms below are written from the shapes,
// GEMM by GEMM (2 m n k FLOPs for an (m x k)(k x n) product), not from the
// generator's own expressions.
TransformerSpec Llama3_8B(int layers = 32) {
  return {.layers = layers, .d_model = 4096, .ffn = 14336, .heads = 32, .seq = 8192, .vocab = 128256,
          .causal = true, .dtype = Dtype::kBf16, .kv_heads = 8, .mlp = MlpKind::kSwiglu, .norm = NormKind::kRmsNorm,
          .position = PositionKind::kRope, .bias = false, .tied_embeddings = false,
          .attention = AttentionKind::kFused};
}

TEST(Transformer, Llama3_8BParameterCount) {
  const Model m = GenerateTransformer(Llama3_8B());
  ASSERT_EQ(m.layers.size(), 34u);
  // One block: Wq 4096 x 4096, Wk and Wv 4096 x 1024 (8 of 32 heads, 128
  // wide), Wo 4096 x 4096, W1 and W3 4096 x 14336, W2 14336 x 4096, two
  // RMSNorm scales of 4096; no biases.
  const double block = 4096.0 * 4096 + 2 * 4096.0 * 1024 + 4096.0 * 4096 + 3 * 4096.0 * 14336 + 2 * 4096;
  EXPECT_DOUBLE_EQ(block, 218112000.0);
  EXPECT_DOUBLE_EQ(m.layers[1].params, 218112000.0);
  // Embedding 128256 x 4096 (no position table), head: its own 4096 x
  // 128256 projection and the final RMSNorm: Meta's 8.03e9.
  EXPECT_DOUBLE_EQ(m.layers[0].params, 128256.0 * 4096);
  EXPECT_DOUBLE_EQ(m.layers.back().params, 128256.0 * 4096 + 4096);
  EXPECT_DOUBLE_EQ(Sum(m, &Layer::params), 32 * 218112000.0 + 2 * 128256.0 * 4096 + 4096);
  EXPECT_NEAR(Sum(m, &Layer::params), 8.03e9, 0.005e9);
  // Tied: the head reuses the embedding; learned positions add S x d.
  TransformerSpec s = Llama3_8B();
  s.tied_embeddings = true;
  s.position = PositionKind::kLearned;
  const Model tied = GenerateTransformer(s);
  EXPECT_DOUBLE_EQ(tied.layers.back().params, 4096);
  EXPECT_DOUBLE_EQ(tied.layers[0].params, 128256.0 * 4096 + 8192.0 * 4096);
}

// Per sample of S tokens, each GEMM of Llama's block as Megatron's and the
// Llama 3 paper's FLOP counts take them: Q and O 2 S d^2 each, K and V
// 2 S d kv each, gate, up and down 2 S d f each; attention QK^T and PV
// 2 S^2 d each (half of it under a causal mask in a fused kernel), the
// fused backward 2.5x its forward (dQ, dK, dV, dP and QK^T again).
TEST(Transformer, GqaSwigluAndFusedAttentionFlopsPerGemm) {
  for (const bool causal : {false, true}) {
    for (const bool fused : {false, true}) {
      TransformerSpec s = Llama3_8B(2);
      s.seq = 2048;
      s.causal = causal;
      s.attention = fused ? AttentionKind::kFused : AttentionKind::kUnfused;
      SCOPED_TRACE(fmt::format("causal={} fused={}", causal, fused));
      const Model m = GenerateTransformer(s);
      const Layer& b = m.layers[1];
      const double S = 2048, d = 4096, kv = 1024, f = 14336;
      const double q = 2 * S * d * d, k = 2 * S * d * kv, v = k, o = 2 * S * d * d;
      const double gate = 2 * S * d * f, up = gate, down = 2 * S * f * d;
      const double linears = q + k + v + o + gate + up + down;
      const double share = fused && causal ? 0.5 : 1;
      const double qk = 2 * S * S * d * share, pv = qk;
      const double attention_bwd = fused ? 5 * qk : 2 * (qk + pv);
      EXPECT_DOUBLE_EQ(b.fwd_flops, linears + qk + pv);
      EXPECT_DOUBLE_EQ(b.bwd_input_flops, linears + attention_bwd);
      EXPECT_DOUBLE_EQ(b.bwd_weight_flops, linears);
      for (size_t i = 1; i < m.layers.size(); ++i) {  // blocks and head: their kernels add up (the embedding's adds are no GEMMs)
        const Layer& l = m.layers[i];
        EXPECT_DOUBLE_EQ(PassFlops(l, Kernel::Pass::kForward), l.fwd_flops) << l.name;
        EXPECT_DOUBLE_EQ(PassFlops(l, Kernel::Pass::kInput), l.bwd_input_flops) << l.name;
        EXPECT_DOUBLE_EQ(PassFlops(l, Kernel::Pass::kWeight), l.bwd_weight_flops) << l.name;
      }
      // The QKV GEMM is d + 2 kv wide; gate and up run as one GEMM 2f wide.
      EXPECT_DOUBLE_EQ(Find(b, "qkv")->n, d + 2 * kv);
      EXPECT_DOUBLE_EQ(Find(b, "fc1")->n, 2 * f);
      // Per token, training FLOPs of the block's GEMMs: 6 x (the weights' 2 x params).
      EXPECT_DOUBLE_EQ(3 * 2 * (b.params - 2 * d) * S, 3 * linears);
      // Fused: one kernel, no softmax or S x S memory-bound kernel.
      EXPECT_EQ(Find(b, "flash_attn") != nullptr, fused);
      EXPECT_EQ(Find(b, "softmax.torch") == nullptr, fused);
      EXPECT_EQ(Find(b, "attn_dropout") == nullptr, fused);
    }
  }
}

// Bytes of each new memory-bound kernel, per sample (e bytes an element):
// SiLU-and-multiply reads gate and up and writes their product (3 S f),
// its backward reads both and the gradient and writes two (5 S f); squared
// ReLU reads and writes S f (3 S f backward); RoPE reads and writes Q and K
// (2 S (d + kv)) each way; the unfused path expands K and V from kv to d
// wide (read 2 S kv, write 2 S d) and sums their gradients back.
TEST(Transformer, NewKernelsBytesInClosedForm) {
  const double S = 512, d = 1024, f = 2816, kv = 256, e = 2;
  auto spec = [](MlpKind mlp, PositionKind position, AttentionKind attention, bool bias) {
    return TransformerSpec{.layers = 1, .d_model = 1024, .ffn = 2816, .heads = 16, .seq = 512, .vocab = 1000,
                           .dtype = Dtype::kBf16, .kv_heads = 4, .mlp = mlp, .position = position, .bias = bias,
                           .attention = attention};
  };
  const Layer swiglu =
      GenerateTransformer(spec(MlpKind::kSwiglu, PositionKind::kRope, AttentionKind::kUnfused, false)).layers[1];
  EXPECT_DOUBLE_EQ(Find(swiglu, "swiglu")->bytes, 3 * S * f * e);
  EXPECT_DOUBLE_EQ(Find(swiglu, "swiglu.bwd")->bytes, 5 * S * f * e);
  EXPECT_DOUBLE_EQ(Find(swiglu, "rope")->bytes, 2 * S * (d + kv) * e);
  EXPECT_DOUBLE_EQ(Find(swiglu, "rope.bwd")->bytes, 2 * S * (d + kv) * e);
  EXPECT_DOUBLE_EQ(Find(swiglu, "kv.expand")->bytes, 2 * S * kv * e + 2 * S * d * e);
  EXPECT_DOUBLE_EQ(Find(swiglu, "kv.expand.bwd")->bytes, 2 * S * kv * e + 2 * S * d * e);
  EXPECT_EQ(Find(swiglu, "bias.wgrad"), nullptr);
  EXPECT_EQ(Find(swiglu, "gelu"), nullptr);
  const Layer relu2 =
      GenerateTransformer(spec(MlpKind::kSquaredRelu, PositionKind::kLearned, AttentionKind::kFused, true)).layers[1];
  EXPECT_DOUBLE_EQ(Find(relu2, "squared_relu")->bytes, 2 * S * f * e);
  EXPECT_DOUBLE_EQ(Find(relu2, "squared_relu.bwd")->bytes, 3 * S * f * e);
  EXPECT_EQ(Find(relu2, "rope"), nullptr);
  EXPECT_EQ(Find(relu2, "kv.expand"), nullptr);  // the fused kernel reads the kv_heads directly
  // Bias gradients: QKV (d + 2kv), output projection d, FFN-up f, FFN-down d, one more d (as today's 6d + f).
  EXPECT_DOUBLE_EQ(Find(relu2, "bias.wgrad")->bytes, S * (d + 2 * kv + d + f + d + d) * e);
  // Squared ReLU has GeLU's parameters and FLOPs: 2 GEMMs of d x f.
  const Layer gelu =
      GenerateTransformer(spec(MlpKind::kGelu, PositionKind::kLearned, AttentionKind::kFused, true)).layers[1];
  EXPECT_DOUBLE_EQ(relu2.params, gelu.params);
  EXPECT_DOUBLE_EQ(relu2.fwd_flops, gelu.fwd_flops);
  // Rotary positions: the embedding adds no table and no FLOPs.
  const Model rope = GenerateTransformer(spec(MlpKind::kGelu, PositionKind::kRope, AttentionKind::kFused, true));
  EXPECT_EQ(Find(rope.layers[0], "positions"), nullptr);
  EXPECT_DOUBLE_EQ(rope.layers[0].fwd_flops, 0);
  EXPECT_DOUBLE_EQ(rope.layers[0].params, 1000 * d);
}

// The norms' bytes, per sample, LayerNorm and RMSNorm alike (a streaming
// read and write; their statistics are a row's few bytes): forward, read
// the S x d input and write it normed (2 S d e); backward, read the input
// and the output gradient and write the input gradient (3 S d e). Sequence
// parallelism divides them by t. In FP8 a norm feeding a Transformer Engine
// LayerNormLinear (QKV, a dense FC1) writes its output in FP8 (1 byte) and,
// when it is not gathered afterwards, the transpose too (1 more byte).
TEST(Transformer, NormBytesInClosedForm) {
  const double S = 512, d = 1024, e = 2;
  for (const NormKind norm : {NormKind::kLayerNorm, NormKind::kRmsNorm}) {
    for (const Dtype dtype : {Dtype::kBf16, Dtype::kFp8}) {
      for (const int t : {1, 4}) {
        SCOPED_TRACE(fmt::format("{} {} t={}", norm == NormKind::kRmsNorm ? "rmsnorm" : "layernorm",
                                 DtypeName(dtype), t));
        const TransformerSpec spec{.layers = 1, .d_model = 1024, .ffn = 2816, .heads = 16, .seq = 512, .vocab = 1024,
                                   .dtype = dtype, .kv_heads = 4, .mlp = MlpKind::kSwiglu, .norm = norm,
                                   .tensor_parallel = t, .sequence_parallel = t > 1};
        const Layer b = GenerateTransformer(spec).layers[1];
        const double n = t;  // sequence parallel with t > 1
        const double out = dtype == Dtype::kFp8 ? (t > 1 ? 1 : 2) : e;
        for (const char* name : {"ln1", "ln2"}) {
          EXPECT_DOUBLE_EQ(Find(b, name)->bytes, (e + out) * S * d / n) << name;
          EXPECT_DOUBLE_EQ(Find(b, std::string(name) + ".bwd")->bytes, 3 * S * d * e / n) << name;
        }
      }
    }
  }
}

// Parameters per block from the shapes, each option alone.
TEST(Transformer, NormsBiasesAndKvHeadsInParameters) {
  const double d = 1024, f = 4096, kv = 128;  // 16 heads of 64, 2 K/V heads
  TransformerSpec s{.layers = 1, .d_model = 1024, .ffn = 4096, .heads = 16, .seq = 128, .vocab = 1000};
  const double gpt = 4 * d * d + 2 * d * f + (3 * d + f + 2 * d) + 2 * (2 * d);  // weights, biases, 2 layernorms
  EXPECT_DOUBLE_EQ(GenerateTransformer(s).layers[1].params, gpt);
  s.norm = NormKind::kRmsNorm;
  EXPECT_DOUBLE_EQ(GenerateTransformer(s).layers[1].params, gpt - 2 * d);
  EXPECT_DOUBLE_EQ(GenerateTransformer(s).layers.back().params, d * 1000 + 1000 + d);
  s.bias = false;
  EXPECT_DOUBLE_EQ(GenerateTransformer(s).layers[1].params, 4 * d * d + 2 * d * f + 2 * d);
  EXPECT_DOUBLE_EQ(GenerateTransformer(s).layers.back().params, d * 1000 + d);
  s.kv_heads = 2;
  EXPECT_DOUBLE_EQ(GenerateTransformer(s).layers[1].params, 2 * d * d + 2 * d * kv + 2 * d * f + 2 * d);
  s.kv_heads = 1;  // multi-query: one K and one V head of d/h
  EXPECT_DOUBLE_EQ(GenerateTransformer(s).layers[1].params, 2 * d * d + 2 * d * 64 + 2 * d * f + 2 * d);
}

// Korthikanti et al.'s 34 S d + 5 h S^2 bytes at 16 bits, from its parts:
// norms' inputs 4 S d; QKV input 2 S d; Q 2 S d and K 2 S d; softmax
// output, its dropout mask and output 5 h S^2; V 2 S d; projection input
// 2 S d; dropout mask S d; FFN-up input 2 S d; the f-wide activation's
// input and FFN-down's input, 2 S f each (8 S d each at f = 4d); dropout
// mask S d. SwiGLU keeps gate and up (4 S f) and their product (2 S f); a
// fused kernel keeps no scores, and K and V as they are (kv wide), where
// the unfused path keeps them expanded to d.
TEST(Transformer, StashOfTheNewBlocksFromItsParts) {
  const double S = 1024, d = 2048, f = 5632, h = 16, kv = 512;
  for (const bool fused : {false, true}) {
    for (const MlpKind mlp : {MlpKind::kGelu, MlpKind::kSwiglu, MlpKind::kSquaredRelu}) {
      const TransformerSpec s{.layers = 1, .d_model = 2048, .ffn = 5632, .heads = 16, .seq = 1024, .vocab = 1000,
                              .dtype = Dtype::kBf16, .kv_heads = 4, .mlp = mlp,
                              .attention = fused ? AttentionKind::kFused : AttentionKind::kUnfused};
      SCOPED_TRACE(fmt::format("fused={} mlp={}", fused, int(mlp)));
      const double k_and_v = fused ? 4 * S * kv : 4 * S * d;
      const double mlp_kept = (mlp == MlpKind::kSwiglu ? 6 : 4) * S * f;
      const double scores = fused ? 0 : 5 * h * S * S;
      const double expected = 4 * S * d + 2 * S * d + 2 * S * d + k_and_v + scores + 2 * S * d + S * d + 2 * S * d +
                              mlp_kept + S * d;
      EXPECT_DOUBLE_EQ(GenerateTransformer(s).layers[1].stash_bytes, expected);
    }
  }
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
