// Multi-head latent attention (issue 41, point 1: DeepSeek's MLA) against
// the published parameter counts of DeepSeek-V3 (671B in all, 37B used per
// token) and DeepSeek-V2-Lite (15.7B, 2.4B; Q without a latent), FLOPs
// from the projections' shapes, and the kernels adding up to the layers.
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cost_models/config.h"
#include "cost_models/generators.h"
#include "cost_models/model_test_util.h"

namespace twinpipe::cost {
namespace {

using testing::Find;
using testing::PassFlops;
using testing::Sum;

// DeepSeek-V3 (DeepSeek-AI 2024, its released config): 61 blocks of d 7168,
// 128 heads; Q from a 1536-wide latent, K and V from a 512-wide one, heads
// of 128 + 64 rotary (queries, keys) and 128 (values); the first 3 blocks
// dense (FFN 18432), then 256 routed experts of 2048, top-8, and one shared
// expert; vocabulary 129280, untied.
TransformerSpec DeepSeekV3(int layers = 61) {
  return {.layers = layers, .d_model = 7168, .ffn = 18432, .heads = 128, .seq = 4096, .vocab = 129280,
          .causal = true, .dtype = Dtype::kBf16, .q_lora_rank = 1536, .kv_lora_rank = 512, .qk_head_dim = 128,
          .qk_rope_head_dim = 64, .v_head_dim = 128, .mlp = MlpKind::kSwiglu, .norm = NormKind::kRmsNorm,
          .position = PositionKind::kRope, .bias = false, .tied_embeddings = false,
          .attention = AttentionKind::kFused, .experts = 256, .top_k = 8, .moe_ffn = 2048,
          .shared_experts = 1, .moe_first_dense = 3};
}

// The attention's weights from its shapes: q_down d x 1536, its norm, q_up
// 1536 x h (128 + 64), kv_down d x (512 + 64), its norm, kv_up 512 x h (128
// + 128), the output projection h 128 x d.
double V3Attention() {
  const double d = 7168, h = 128;
  return d * 1536 + 1536 + 1536 * h * 192 + d * 576 + 512 + 512 * h * 256 + h * 128 * d;
}

TEST(Mla, DeepSeekV3ParameterCounts) {
  const Model m = GenerateTransformer(DeepSeekV3());
  const double d = 7168, V = 129280, expert = 3 * d * 2048;
  EXPECT_DOUBLE_EQ(m.layers[1].params, V3Attention() + 2 * d + 3 * d * 18432);              // a dense block
  EXPECT_DOUBLE_EQ(m.layers[4].params, V3Attention() + 2 * d + d * 256 + 257 * expert);     // an MoE block
  const double total = Sum(m, &Layer::params);
  EXPECT_NEAR(total, 671e9, 1e9);
  // Used per token (DeepSeek's count leaves out the input embedding, a
  // lookup): 8 routed experts of 256, the shared one, everything else.
  EXPECT_NEAR(total - V * d - 58 * (256 - 8) * expert, 37e9, 1e9);
}

// DeepSeek-V2-Lite: 27 blocks of d 2048, 16 heads, Q straight from the input
// (no latent), K and V from 512; the first block dense (FFN 10944), then 64
// routed experts of 1408, top-6, two shared; vocabulary 102400.
TEST(Mla, DeepSeekV2LiteParameterCounts) {
  TransformerSpec s = DeepSeekV3(27);
  s.d_model = 2048;
  s.heads = 16;
  s.ffn = 10944;
  s.vocab = 102400;
  s.q_lora_rank = 0;
  s.experts = 64;
  s.top_k = 6;
  s.moe_ffn = 1408;
  s.shared_experts = 2;
  s.moe_first_dense = 1;
  const Model m = GenerateTransformer(s);
  const double d = 2048, h = 16, attention = d * h * 192 + d * 576 + 512 + 512 * h * 256 + h * 128 * d;
  EXPECT_DOUBLE_EQ(m.layers[1].params, attention + 2 * d + 3 * d * 10944);
  EXPECT_EQ(Find(m.layers[1], "q_down"), nullptr);
  ASSERT_NE(Find(m.layers[1], "q"), nullptr);
  const double total = Sum(m, &Layer::params);
  EXPECT_NEAR(total, 15.7e9, 0.1e9);
  EXPECT_NEAR(total - 102400 * d - 26 * (64 - 6) * 3 * d * 1408, 2.4e9, 0.1e9);  // as for V3: no input embedding
}

// FLOPs per sample from the shapes: 2 S x each projection's weights (the
// down-projections on every GPU of the group, the rest split over t), the
// attention core 2 c S^2 h (dqk + dv) forward and 2 c S^2 h (3 dqk + 2 dv)
// in the backward (c = 1/2 causal); the kernels add up to the layers.
TEST(Mla, BlockFlopsInClosedForm) {
  for (const int t : {1, 4}) {
    SCOPED_TRACE(fmt::format("t {}", t));
    TransformerSpec s = DeepSeekV3(5);
    s.seq = 2048;
    s.experts = 16;
    s.top_k = 2;
    s.tensor_parallel = t;
    s.sequence_parallel = t > 1;
    const Model m = GenerateTransformer(s);
    const double S = 2048, d = 7168, h = 128, c = 0.5;
    const double split = 1536 * h * 192 + 512 * h * 256 + h * 128 * d, replicated = d * 1536 + d * 576;
    const double core = c * 2 * S * S * h * (192 + 128) / t, core_bwd = c * 2 * S * S * h * (3 * 192 + 2 * 128) / t;
    const double mlp = 2 * S * 3 * d * 18432 / t;
    const Layer& dense = m.layers[1];
    EXPECT_DOUBLE_EQ(dense.fwd_flops, 2 * S * split / t + 2 * S * replicated + mlp + core);
    EXPECT_DOUBLE_EQ(dense.bwd_input_flops, 2 * S * split / t + 2 * S * replicated + mlp + core_bwd);
    EXPECT_DOUBLE_EQ(dense.bwd_weight_flops, 2 * S * split / t + 2 * S * replicated + mlp);
    for (size_t i = 1; i + 1 < m.layers.size(); ++i) {
      const Layer& l = m.layers[i];
      EXPECT_DOUBLE_EQ(PassFlops(l, Kernel::Pass::kForward), l.fwd_flops) << l.name;
      EXPECT_DOUBLE_EQ(PassFlops(l, Kernel::Pass::kInput), l.bwd_input_flops) << l.name;
      EXPECT_DOUBLE_EQ(PassFlops(l, Kernel::Pass::kWeight), l.bwd_weight_flops) << l.name;
    }
    EXPECT_DOUBLE_EQ(Find(dense, "kv_up")->n, h * 256 / t);
    EXPECT_DOUBLE_EQ(Find(dense, "kv_down")->n, 576);  // replicated: whole on every GPU
    EXPECT_DOUBLE_EQ(Find(dense, "proj")->k, h * 128 / t);
    EXPECT_EQ(Find(dense, "qkv"), nullptr);
  }
}

// What a block keeps for its backward against the same block with Megatron's
// attention (Q, K, V and the projection's input d / t each): Q and K of
// h (dn + dr), V and the projection's input of h dv, split over t; and on
// every GPU the latents: q_down's and q_norm's outputs (1536 each),
// kv_down's (512 + 64) and kv_norm's (512).
TEST(Mla, StashFromItsTensors) {
  for (const int t : {1, 2}) {
    TransformerSpec s = DeepSeekV3(2);
    s.seq = 1024;
    s.experts = 0;
    s.moe_ffn = 0;
    s.moe_first_dense = 0;
    s.top_k = 1;
    s.shared_experts = 0;
    s.tensor_parallel = t;
    TransformerSpec mha = s;
    mha.kv_lora_rank = 0;
    mha.q_lora_rank = 0;
    mha.heads = 56;  // d / h = 128 = the MLA heads' value width
    const double S = 1024, d = 7168, h = 128, e = 2;
    const double split = (2 * h * 192 + 2 * h * 128 - 4 * d) * e / t, latents = (2 * 1536 + 576 + 512) * e;
    const Model ma = GenerateTransformer(s), mb = GenerateTransformer(mha);
    const Layer& a = ma.layers[1];
    const Layer& b = mb.layers[1];
    EXPECT_NEAR(a.stash_bytes - b.stash_bytes, S * (split + latents), 1e-6 * a.stash_bytes) << t;
  }
}

TEST(Mla, ConfigReadsTheFieldsAndNamesBadOnes) {
  auto load = [](const std::string& extra) {
    return LoadConfig(R"({"model": {"generator": "transformer", "layers": 2, "d_model": 256, "heads": 4, "seq": 64,
      "vocab": 100, "attention": "fused")" + extra + R"(}, "training": {"batch": 2, "microbatches": 1}, "pipeline": {"stages": 1},
      "cluster": {"device": "H100-SXM", "devices": 1}})", "m.json");
  };
  auto ok = load(R"(, "kv_lora_rank": 32, "q_lora_rank": 48, "qk_rope_head_dim": 16)");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(ok->transformer->Mla());
  EXPECT_EQ(ok->transformer->qk_head_dim, 64);  // d / heads
  EXPECT_EQ(ok->transformer->v_head_dim, 64);
  for (const auto& [extra, message] : std::vector<std::pair<std::string, std::string>>{
           {R"(, "q_lora_rank": 48)", "/model/q_lora_rank: describes multi-head latent attention, but "
                                      "/model/kv_lora_rank is not given"},
           {R"(, "kv_lora_rank": 32, "kv_heads": 2)", "/model/kv_heads: multi-head latent attention gives every one"},
       }) {
    auto bad = load(extra);
    ASSERT_FALSE(bad) << extra;
    EXPECT_NE(bad.error().message.find(message), std::string::npos) << bad.error().message;
  }
  auto unfused = LoadConfig(R"({"model": {"generator": "transformer", "layers": 2, "d_model": 256, "heads": 4,
      "seq": 64, "vocab": 100, "kv_lora_rank": 32}, "training": {"batch": 2, "microbatches": 1}, "pipeline": {"stages": 1},
      "cluster": {"device": "H100-SXM", "devices": 1}})", "m.json");
  ASSERT_FALSE(unfused);
  EXPECT_NE(unfused.error().message.find("/model/kv_lora_rank: multi-head latent attention runs in a fused"),
            std::string::npos) << unfused.error().message;
}

}  // namespace
}  // namespace twinpipe::cost
