// The mixture-of-experts block (issue 41, point 1) against closed forms
// written from its shapes, published parameter counts, and the dense block it
// must equal when nothing is routed.
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cost_models/catalogue.h"
#include "cost_models/comm_model.h"
#include "cost_models/compute_model.h"
#include "cost_models/config.h"
#include "cost_models/generators.h"
#include "cost_models/model_test_util.h"

namespace twinpipe::cost {
namespace {

using testing::Find;
using testing::PassFlops;
using testing::Sum;

// Mixtral 8x7B (Jiang et al. 2024, and its released config): 32 blocks of d
// 4096, 32 heads, 8 K/V heads, 8 SwiGLU experts of 14336, top-2, vocabulary
// 32000, RMSNorm, rotary positions, no biases, untied embeddings.
TransformerSpec Mixtral8x7B(int layers = 32) {
  return {.layers = layers, .d_model = 4096, .ffn = 14336, .heads = 32, .seq = 4096, .vocab = 32000,
          .causal = true, .dtype = Dtype::kBf16, .kv_heads = 8, .mlp = MlpKind::kSwiglu, .norm = NormKind::kRmsNorm,
          .position = PositionKind::kRope, .bias = false, .tied_embeddings = false,
          .attention = AttentionKind::kFused, .experts = 8, .top_k = 2, .moe_ffn = 14336};
}

// Mistral AI's figures: 46.7B parameters in all, 12.9B used per token.
TEST(Moe, Mixtral8x7BParameterCounts) {
  const Model m = GenerateTransformer(Mixtral8x7B());
  const double d = 4096, kv = 1024, f = 14336, E = 8, V = 32000;
  // A block: Wq, Wo (d x d), Wk, Wv (d x kv), the router (d x E), 8 experts
  // of three d x f matrices, two RMSNorm scales.
  const double block = 2 * d * d + 2 * d * kv + d * E + E * 3 * d * f + 2 * d;
  EXPECT_DOUBLE_EQ(m.layers[1].params, block);
  const double total = Sum(m, &Layer::params);
  EXPECT_DOUBLE_EQ(total, 32 * block + 2 * V * d + d);
  EXPECT_NEAR(total, 46.7e9, 0.05e9);
  // Active: two of the eight experts.
  EXPECT_NEAR(total - 32 * (E - 2) * 3 * d * f, 12.9e9, 0.05e9);
}

// Per sample of S tokens, GEMM by GEMM: the router 2 S d E; each token's k
// routed copies through an expert's gate, up and down (2 S d f_e each, times
// k x the capacity factor when padded); a shared expert as a dense SwiGLU
// MLP of n_s f_e; the attention as the dense block's. The kernels add up to
// the layer in each pass.
TEST(Moe, BlockFlopsInClosedForm) {
  for (const double cf : {0.0, 1.25}) {
    for (const int shared : {0, 2}) {
      for (const int t : {1, 4}) {
        SCOPED_TRACE(fmt::format("capacity {} shared {} t {}", cf, shared, t));
        TransformerSpec s = Mixtral8x7B(2);
        s.seq = 2048;
        s.capacity_factor = cf;
        s.shared_experts = shared;
        s.moe_ffn = 2048;
        s.tensor_parallel = t;
        s.sequence_parallel = t > 1;
        TransformerSpec dense = s;
        dense.experts = 0;
        const Model m = GenerateTransformer(s), md = GenerateTransformer(dense);
        const Layer& b = m.layers[1];
        const Layer& bd = md.layers[1];
        const double S = 2048, d = 4096, f = 14336, fe = 2048, E = 8, k = 2;
        const double r = k * (cf > 0 ? cf : 1);
        const double router = 2 * (S / t) * d * E;  // on this GPU's shard of the tokens, replicated
        const double experts = 3 * 2 * S * r * d * fe / t;
        const double shared_mlp = 3 * 2 * S * d * shared * fe / t;
        const double dense_mlp = 3 * 2 * S * d * f / t;
        for (auto [moe_flops, dense_flops] : {std::pair{b.fwd_flops, bd.fwd_flops},
                                              {b.bwd_input_flops, bd.bwd_input_flops},
                                              {b.bwd_weight_flops, bd.bwd_weight_flops}}) {
          EXPECT_DOUBLE_EQ(moe_flops - (dense_flops - dense_mlp), router + experts + shared_mlp);
        }
        for (size_t i = 1; i < m.layers.size(); ++i) {  // the embedding's adds are no GEMMs
          const Layer& l = m.layers[i];
          EXPECT_DOUBLE_EQ(PassFlops(l, Kernel::Pass::kForward), l.fwd_flops) << l.name;
          EXPECT_DOUBLE_EQ(PassFlops(l, Kernel::Pass::kInput), l.bwd_input_flops) << l.name;
          EXPECT_DOUBLE_EQ(PassFlops(l, Kernel::Pass::kWeight), l.bwd_weight_flops) << l.name;
        }
        // The experts' GEMMs: E of (S r / E) tokens each; gate and up as one.
        const Kernel* fc1 = Find(b, "experts.fc1");
        ASSERT_NE(fc1, nullptr);
        EXPECT_DOUBLE_EQ(fc1->m, S * r / E);
        EXPECT_DOUBLE_EQ(fc1->batch, E);
        EXPECT_DOUBLE_EQ(fc1->n, 2 * fe / t);
        EXPECT_EQ(Find(b, "shared.fc1") != nullptr, shared > 0);
        EXPECT_EQ(Find(b, "fc1"), nullptr);
      }
    }
  }
}

// Bytes of the routing kernels per sample (e bytes an element; X = S d e
// the tokens, P = k X their routed copies, k S combine weights of 2 bytes),
// as Megatron-Core's moe_utils.py runs them: the permutation an
// index_select (read X, write P), its gradient a zeroed X and an index_add
// (X + P + 2 X); the combine the copies times their weights, a zeroed X and
// a scatter-add (2 P + 2 k S, X, P + 2 X: three launches), its gradient a
// gather, the weights' product and the weights' gradient with its sum (X +
// P, 2 P + 2 k S, 3 P + 2 k S, P: four launches). The router's top-k over
// fp32 logits reads and writes S E and writes S k indices and weights (8
// bytes a logit, 8 a choice), its backward 12 bytes a logit; beside them
// Megatron-Core's router launches 18 small kernels forward and 11 backward
// without a capacity (each read and written within 8 bytes a logit). The
// router's and the permutation's small kernels are counted call by call in
// the source: one framework op each, where a module's modelled kernel
// stands for kOpsPerKernel. Without a grouped GEMM each expert's GEMM is a
// launch of its own, and the experts' outputs are concatenated (read and
// write P), the split of their inputs concatenated back in the backward.
TEST(Moe, RoutingKernelsBytesInClosedForm) {
  TransformerSpec s = Mixtral8x7B(1);
  s.seq = 1024;
  s.grouped_gemm = false;
  const Model m = GenerateTransformer(s);
  const Layer& b = m.layers[1];
  const double S = 1024, d = 4096, e = 2, E = 8, k = 2;
  const double X = S * d * e, P = k * X, w = k * S;
  auto expect = [&](const char* name, double launches, double bytes, double ops) {
    SCOPED_TRACE(name);
    ASSERT_NE(Find(b, name), nullptr);
    EXPECT_DOUBLE_EQ(Find(b, name)->launches, launches);
    EXPECT_DOUBLE_EQ(Find(b, name)->bytes, bytes);
    EXPECT_DOUBLE_EQ(Find(b, name)->framework_ops, ops);
  };
  expect("permute", 1, X + P, kOpsPerKernel);
  expect("permute.bwd", 2, 3 * X + P, 1);
  expect("unpermute", 3, 3 * X + 3 * P + 2 * w, 1);
  expect("unpermute.bwd", 4, X + 7 * P + 4 * w, 1);
  expect("router.topk", 1, 8 * S * E + 8 * S * k, kOpsPerKernel);
  expect("router.topk.bwd", 1, 12 * S * E, kOpsPerKernel);
  expect("router.select", 18, 18 * 8 * S * E, 1);
  expect("router.select.bwd", 11, 11 * 8 * S * E, 1);
  expect("experts.cat", 1, 2 * P, kOpsPerKernel);
  expect("experts.split.bwd", 1, 2 * P, kOpsPerKernel);
  EXPECT_DOUBLE_EQ(Find(b, "experts.fc1")->launches, E);
  EXPECT_DOUBLE_EQ(Find(b, "experts.fc2.wgrad")->launches, E);
  EXPECT_DOUBLE_EQ(Find(b, "router")->launches, 1);
  // No tensor or context parallelism: the auxiliary loss's counts are this GPU's own.
  EXPECT_EQ(Find(b, "router.aux_loss.allreduce"), nullptr);
  // A grouped GEMM takes the experts' tokens whole: no split, no concatenation.
  s.grouped_gemm = true;
  const Model g = GenerateTransformer(s);
  EXPECT_EQ(Find(g.layers[1], "experts.cat"), nullptr);
  EXPECT_EQ(Find(g.layers[1], "experts.split.bwd"), nullptr);
  // One expert on each GPU (expert parallelism 8) runs its tokens whole too.
  s.grouped_gemm = false;
  s.expert_parallel = 8;
  const Model one = GenerateTransformer(s);
  EXPECT_EQ(Find(one.layers[1], "experts.cat"), nullptr);
  EXPECT_NE(Find(one.layers[1], "experts.fc1"), nullptr);
  s.expert_parallel = 1;
  // With a capacity factor (tokens dropped, padded to it) the router masks
  // the gates by it, six kernels more forward and one backward, and every
  // expert takes its capacity: 1.5 k copies of each token, and as many
  // combine weights.
  s.capacity_factor = 1.5;
  const Model capped = GenerateTransformer(s);
  const Layer& c = capped.layers[1];
  EXPECT_DOUBLE_EQ(Find(c, "router.select")->launches, 24);
  EXPECT_DOUBLE_EQ(Find(c, "router.select.bwd")->launches, 12);
  const double Pc = 1.5 * P, wc = 1.5 * w;
  EXPECT_DOUBLE_EQ(Find(c, "unpermute")->bytes, 3 * X + 3 * Pc + 2 * wc);
  EXPECT_DOUBLE_EQ(Find(c, "unpermute.bwd")->bytes, X + 7 * Pc + 4 * wc);
  EXPECT_DOUBLE_EQ(Find(c, "experts.cat")->bytes, 2 * Pc);
  // Skewed routing: the busiest GPU (its E / 2 experts take the k S copies
  // its pair routes to them, balanced) concatenates its experts' larger share.
  s.capacity_factor = 0;
  s.expert_parallel = 2;
  s.routing_skew = 1;
  const Model skewed = GenerateTransformer(s);
  EXPECT_DOUBLE_EQ(Find(skewed.layers[1], "experts.cat")->bytes, 2 * P * s.BusiestExpertGpuLoad());
  EXPECT_GT(s.BusiestExpertGpuLoad(), 1);
}

// One expert that every token takes (E = k = 1) is no router and no
// permutation: exactly the dense block with an MLP of the expert's width.
TEST(Moe, OneExpertIsTheDenseBlock) {
  for (const Dtype dtype : {Dtype::kBf16, Dtype::kFp8}) {
    TransformerSpec s = Mixtral8x7B(3);
    s.dtype = dtype;
    s.experts = 1;
    s.top_k = 1;
    s.moe_ffn = 6144;
    s.tensor_parallel = 2;
    s.sequence_parallel = true;
    TransformerSpec dense = s;
    dense.experts = 0;
    dense.moe_ffn = 0;
    dense.ffn = 6144;
    const Model a = GenerateTransformer(s), b = GenerateTransformer(dense);
    ASSERT_EQ(a.layers.size(), b.layers.size());
    for (size_t i = 0; i < a.layers.size(); ++i) {
      const Layer &x = a.layers[i], &y = b.layers[i];
      SCOPED_TRACE(x.name);
      EXPECT_EQ(x.fwd_flops, y.fwd_flops);
      EXPECT_EQ(x.bwd_input_flops, y.bwd_input_flops);
      EXPECT_EQ(x.bwd_weight_flops, y.bwd_weight_flops);
      EXPECT_EQ(x.params, y.params);
      EXPECT_EQ(x.stash_bytes, y.stash_bytes);
      ASSERT_EQ(x.kernels.size(), y.kernels.size());
      for (size_t j = 0; j < x.kernels.size(); ++j) {
        const Kernel &p = x.kernels.begin()[j], &q = y.kernels.begin()[j];
        EXPECT_EQ(p.name, q.name);
        EXPECT_EQ(p.Flops(), q.Flops());
        EXPECT_EQ(p.bytes, q.bytes);
      }
    }
  }
}

// moe_every n: blocks 0, n, 2n, ... are MoE (Megatron's moe_layer_freq), the
// others dense with `ffn`.
TEST(Moe, EveryNthBlock) {
  TransformerSpec s = Mixtral8x7B(4);
  s.moe_every = 2;
  s.ffn = 8192;
  const Model m = GenerateTransformer(s);
  for (int i = 0; i < 4; ++i) {
    const Layer& b = m.layers[1 + i];
    EXPECT_EQ(Find(b, "router") != nullptr, i % 2 == 0) << b.name;
    if (i % 2 == 1) {
      EXPECT_DOUBLE_EQ(Find(b, "fc1")->n, 2 * 8192.0) << b.name;
    }
  }
}

// The stash of an MoE block from its parts, in Korthikanti's units of S d
// 16-bit elements: the dense block's 34 less the MLP's 16 (at f = 4d), plus
// the experts' SwiGLU activations over the r routed copies (6 r f_e / d),
// the routed copies in and out of the experts (4 r) and the router's fp32
// probabilities (2 E / d); fused attention keeps K and V unexpanded (-4 (1 -
// kv / d)).
TEST(Moe, StashFromItsParts) {
  TransformerSpec s = Mixtral8x7B(1);
  s.seq = 2048;
  s.capacity_factor = 1.5;
  const Model m = GenerateTransformer(s);
  const double S = 2048, d = 4096, kv = 1024, fe = 14336, E = 8, r = 3;
  const double units = 34 - 16 + 6 * r * fe / d + 4 * r + 2 * E / d - 4 * (1 - kv / d);
  EXPECT_DOUBLE_EQ(m.layers[1].stash_bytes, S * d * units);
}

Config Load(const std::string& model_extra, const std::string& pipeline_extra = "") {
  const std::string text = fmt::format(R"({{
    "model": {{"generator": "transformer", "layers": 4, "d_model": 512, "ffn": 2048, "heads": 8, "seq": 128,
               "vocab": 1024, "mlp": "swiglu"{}}},
    "training": {{"batch": 8, "microbatches": 4}},
    "pipeline": {{"stages": 2{}}},
    "cluster": {{"device": "H100-SXM", "devices": 4}}
  }})", model_extra, pipeline_extra);
  return LoadConfig(text, "moe.json").value();
}

TEST(Moe, ConfigReadsTheFieldsAndNamesBadOnes) {
  const Config c = Load(R"(, "experts": 8, "top_k": 2, "moe_ffn": 1024, "shared_experts": 1, "moe_every": 2,
                           "capacity_factor": 1.25, "grouped_gemm": false)");
  ASSERT_TRUE(c.transformer);
  EXPECT_EQ(c.transformer->experts, 8);
  EXPECT_EQ(c.transformer->top_k, 2);
  EXPECT_EQ(c.transformer->moe_ffn, 1024);
  EXPECT_EQ(c.transformer->shared_experts, 1);
  EXPECT_EQ(c.transformer->moe_every, 2);
  EXPECT_DOUBLE_EQ(c.transformer->capacity_factor, 1.25);
  EXPECT_FALSE(c.transformer->grouped_gemm);
  auto bad = [](const std::string& model_extra, const std::string& pipeline_extra = "") {
    const std::string text = fmt::format(R"({{
      "model": {{"generator": "transformer", "layers": 4, "d_model": 512, "ffn": 2048, "heads": 8, "seq": 128,
                 "vocab": 1024{}}},
      "training": {{"batch": 8, "microbatches": 4}},
      "pipeline": {{"stages": 2{}}},
      "cluster": {{"device": "H100-SXM", "devices": 4}}
    }})", model_extra, pipeline_extra);
    auto r = LoadConfig(text, "moe.json");
    return r ? std::string("accepted") : r.error().message;
  };
  EXPECT_NE(bad(R"(, "experts": 8, "top_k": 9)").find("/model/top_k"), std::string::npos);
  EXPECT_NE(bad(R"(, "top_k": 2)").find("/model/top_k: describes the experts of a mixture of experts"),
            std::string::npos);
  EXPECT_NE(bad(R"(, "experts": 8, "capacity_factor": -1)").find("/model/capacity_factor"), std::string::npos);
  EXPECT_NE(bad(R"(, "experts": 8, "moe_every": 5)").find("/model/moe_every"), std::string::npos);
  EXPECT_NE(bad(R"(, "experts": 8, "moe_ffn": 1022)", R"(, "tensor_parallel": 4, "sequence_parallel": true)")
                .find("/model/moe_ffn"),
            std::string::npos);
  // Megatron-Core trains an MoE beside tensor parallelism only with sequence parallelism.
  EXPECT_NE(bad(R"(, "experts": 8)", R"(, "tensor_parallel": 2)")
                .find("/pipeline/sequence_parallel: a mixture of experts with tensor_parallel > 1 needs sequence "
                      "parallelism"),
            std::string::npos);
  EXPECT_EQ(bad(R"(, "experts": 8)", R"(, "tensor_parallel": 2, "sequence_parallel": true)"), "accepted");
}

// Expert parallelism e, balanced routing: each GPU runs E / e experts over
// as many routed tokens as it routes itself (S r e / E per expert), so its
// FLOPs do not change; it holds E / e experts' weights; four all-to-alls per
// MoE block (dispatch and combine, forward and backward), each of r S d / n
// elements over the e GPUs.
TEST(Moe, ExpertParallelismDividesTheExpertsNotTheWork) {
  for (const bool sp : {false, true}) {
    SCOPED_TRACE(fmt::format("sequence parallel {}", sp));
    TransformerSpec s = Mixtral8x7B(2);
    s.seq = 2048;
    s.tensor_parallel = 2;
    s.sequence_parallel = sp;
    TransformerSpec s4 = s;
    s4.expert_parallel = 4;
    const Model one = GenerateTransformer(s), four = GenerateTransformer(s4);
    const Layer &b1 = one.layers[1], &b4 = four.layers[1];
    EXPECT_DOUBLE_EQ(b4.fwd_flops, b1.fwd_flops);
    EXPECT_DOUBLE_EQ(b4.bwd_input_flops, b1.bwd_input_flops);
    EXPECT_DOUBLE_EQ(b4.bwd_weight_flops, b1.bwd_weight_flops);
    const double S = 2048, d = 4096, fe = 14336, E = 8, r = 2, t = 2, e = 2, n = sp ? t : 1;
    EXPECT_DOUBLE_EQ(b1.params - b4.params, (E - E / 4) * 3 * d * fe / t);
    EXPECT_DOUBLE_EQ(Find(b4, "experts.fc1")->m, S * r * 4 / E);
    EXPECT_DOUBLE_EQ(Find(b4, "experts.fc1")->batch, E / 4);
    int all_to_alls = 0;
    for (const Kernel& k : b4.kernels) {
      if (k.collective != Kernel::Collective::kAllToAll) continue;
      ++all_to_alls;
      EXPECT_DOUBLE_EQ(k.bytes, r * S / n * d * e) << k.name;
      EXPECT_DOUBLE_EQ(k.group, 4) << k.name;
      EXPECT_EQ(k.over, Kernel::Over::kExpert) << k.name;
    }
    EXPECT_EQ(all_to_alls, 4);
    EXPECT_EQ(Find(b1, "dispatch"), nullptr);
  }
}

// Megatron-Core's all-to-all dispatcher beside tensor parallelism t (with
// sequence parallelism): each GPU routes and permutes its shard of S / t
// tokens; after the dispatch it all-gathers, over the et GPUs an expert is
// split across, the r S et / t routed copies its experts run over, and
// reduce-scatters their outputs before the combine (in the backward the
// reverse of each); with E / e > 1 experts here the copies are sorted by
// expert and back (a read and a write each, in both passes). The MLP's
// own tensor-parallel collectives are left to a dense block or to the
// shared experts.
// Mixtral 8x7B's blocks (`blocks` of them) at 2,048 tokens on tensor
// parallelism 4 with sequence parallelism, its experts over ep GPUs, each
// expert's tensor parallelism et.
TransformerSpec ExpertGroupSpec(int blocks, int et, int ep) {
  TransformerSpec s = Mixtral8x7B(blocks);
  s.seq = 2048;
  s.tensor_parallel = 4;
  s.sequence_parallel = true;
  s.expert_parallel = ep;
  s.expert_tensor_parallel = et;
  return s;
}

// The all-gather dispatcher routes with the same router: its small kernels
// and the auxiliary loss's all-reduce over the tensor-parallel group.
TEST(Moe, TheAllGatherDispatcherRoutesWithTheSameRouter) {
  TransformerSpec s = ExpertGroupSpec(1, 4, 2);
  s.dispatcher = MoeDispatcher::kAllGather;
  const Model m = GenerateTransformer(s);
  const Layer& b = m.layers[1];
  ASSERT_NE(Find(b, "router.select"), nullptr);
  EXPECT_DOUBLE_EQ(Find(b, "router.select")->launches, 18);
  EXPECT_DOUBLE_EQ(Find(b, "router.select")->bytes, 18 * 8 * 2048 / 4 * 8);
  ASSERT_NE(Find(b, "router.aux_loss.allreduce"), nullptr);
  EXPECT_DOUBLE_EQ(Find(b, "router.aux_loss.allreduce")->group, 4);
}

// The router's auxiliary loss counts the tokens each expert takes over the
// whole sequence: an all-reduce of E int64 counts over the t x c GPUs that
// share it, on the context group's nodes when c > 1.
TEST(Moe, AuxiliaryLossCountsOverTheTensorAndContextGroup) {
  for (const int t : {1, 4}) {
    for (const int c : {1, 2}) {
      SCOPED_TRACE(fmt::format("t {} c {}", t, c));
      TransformerSpec s = ExpertGroupSpec(2, t, 2);
      s.tensor_parallel = t;
      s.sequence_parallel = t > 1;
      s.context_parallel = c;
      const Model m = GenerateTransformer(s);
      const Kernel* aux = Find(m.layers[1], "router.aux_loss.allreduce");
      if (t * c == 1) {
        EXPECT_EQ(aux, nullptr);  // the counts are this GPU's own
        continue;
      }
      ASSERT_NE(aux, nullptr);
      EXPECT_EQ(aux->collective, Kernel::Collective::kAllReduce);
      EXPECT_DOUBLE_EQ(aux->group, t * c);
      EXPECT_DOUBLE_EQ(aux->bytes, 8 * 8);
      EXPECT_EQ(aux->over, c > 1 ? Kernel::Over::kContext : Kernel::Over::kTensor);
    }
  }
}

TEST(Moe, DispatcherCollectivesInClosedForm) {
  const double S = 2048, d = 4096, E = 8, r = 2, t = 4, e = 2;
  for (const int et : {4, 2, 1}) {
    for (const int ep : {2, 8}) {
      for (const int shared : {0, 1}) {
        SCOPED_TRACE(fmt::format("et {} e {} shared {}", et, ep, shared));
        TransformerSpec s = ExpertGroupSpec(3, et, ep);
        s.shared_experts = shared;
        s.moe_every = 2;  // block 0 MoE, block 1 dense
        const Model m = GenerateTransformer(s);
        const Layer &moe = m.layers[1], &dense = m.layers[2];
        const double copies = r * S * et / t;  // what one GPU's experts run over
        EXPECT_DOUBLE_EQ(Find(moe, "experts.fc1")->m * Find(moe, "experts.fc1")->batch, copies);
        const double X = S / t * d * e;  // this GPU's shard of the tokens
        EXPECT_DOUBLE_EQ(Find(moe, "permute")->bytes, X * (1 + r));
        EXPECT_DOUBLE_EQ(Find(moe, "unpermute")->bytes, 3 * X + 3 * r * X + 2 * r * S / t);
        // The auxiliary loss's tokens per expert (int64), summed over the t GPUs that share the sequence.
        const Kernel* aux = Find(moe, "router.aux_loss.allreduce");
        ASSERT_NE(aux, nullptr);
        EXPECT_EQ(aux->collective, Kernel::Collective::kAllReduce);
        EXPECT_DOUBLE_EQ(aux->bytes, 8 * E);
        EXPECT_DOUBLE_EQ(aux->group, t);
        EXPECT_EQ(aux->over, Kernel::Over::kTensor);
        for (const auto& [name, kind] : std::vector<std::pair<std::string, Kernel::Collective>>{
                 {"experts.gather", Kernel::Collective::kAllGather},
                 {"experts.reduce", Kernel::Collective::kReduceScatter},
                 {"experts.reduce.bwd", Kernel::Collective::kAllGather},
                 {"experts.gather.bwd", Kernel::Collective::kReduceScatter}}) {
          const Kernel* k = Find(moe, name);
          if (et == 1) {
            EXPECT_EQ(k, nullptr) << name;
            continue;
          }
          ASSERT_NE(k, nullptr) << name;
          EXPECT_EQ(k->collective, kind) << name;
          EXPECT_DOUBLE_EQ(k->group, et) << name;
          EXPECT_DOUBLE_EQ(k->bytes, copies * d * e) << name;
          EXPECT_EQ(k->overlaps, Kernel::kInSeries) << name;
        }
        for (const char* name : {"experts.sort", "experts.unsort", "experts.sort.bwd", "experts.unsort.bwd"}) {
          const Kernel* k = Find(moe, name);
          if (ep == E) {
            EXPECT_EQ(k, nullptr) << name;  // one expert here: nothing to sort
          } else {
            ASSERT_NE(k, nullptr) << name;
            EXPECT_DOUBLE_EQ(k->bytes, 2 * copies * d * e) << name;
          }
        }
        // The whole group's MLP collectives: the dense block's always, the
        // MoE block's with a shared expert only, each of one S x d activation.
        for (const char* name :
             {"ln2.allgather", "fc2.reduce", "fc2.reduce.bwd", "fc1.dgrad.reduce", "fc1.wgrad.allgather"}) {
          ASSERT_NE(Find(dense, name), nullptr) << name;
          EXPECT_DOUBLE_EQ(Find(dense, name)->bytes, S * d * e) << name;
          if (shared) {
            ASSERT_NE(Find(moe, name), nullptr) << name;
            EXPECT_DOUBLE_EQ(Find(moe, name)->bytes, S * d * e) << name;
          } else {
            EXPECT_EQ(Find(moe, name), nullptr) << name;
          }
        }
        // Bytes an MoE block moves over the expert group per sample, in
        // all: four times the routed copies' (none when et = 1).
        double group_bytes = 0;
        for (const Kernel& k : moe.kernels) {
          if (k.collective != Kernel::Collective::kNone && k.over == Kernel::Over::kTensor && k.group == et &&
              k.name.starts_with("experts.")) {
            group_bytes += k.bytes;
          }
        }
        EXPECT_DOUBLE_EQ(group_bytes, et > 1 ? 4 * copies * d * e : 0);
        // The all-to-alls: each GPU's r S / t copies over the e GPUs.
        for (const char* name : {"dispatch", "combine", "combine.bwd", "dispatch.bwd"}) {
          ASSERT_NE(Find(moe, name), nullptr) << name;
          EXPECT_EQ(Find(moe, name)->collective, Kernel::Collective::kAllToAll) << name;
          EXPECT_DOUBLE_EQ(Find(moe, name)->bytes, r * S / t * d * e) << name;
          EXPECT_DOUBLE_EQ(Find(moe, name)->group, ep) << name;
        }
        // What an overlapped F/B pair can hide: the all-to-alls alone, not
        // the et gathers (seconds of each kernel priced on its own).
        const Device& h100 = *FindDevice("H100-SXM");
        const Link& nv = *FindLink("nvlink4");
        const CollectiveLinks links{.intra = &nv, .inter = &nv};
        auto seconds = [&](const char* name) { return KernelTime(*Find(moe, name), 1, h100, Dtype::kBf16, 1, links); };
        EXPECT_DOUBLE_EQ(LayerAllToAllTime(moe, ir::OpKind::kForward, h100, Dtype::kBf16, 1, links),
                         seconds("dispatch") + seconds("combine"));
        if (et > 1) {
          EXPECT_GT(seconds("experts.gather"), 0);
        }
        // Transformer Engine's overlap: the shared experts' collectives beside their own GEMMs.
        TransformerSpec overlapped = s;
        overlapped.tp_comm_overlap = true;
        const Model mo = GenerateTransformer(overlapped);
        const Layer& lo = mo.layers[1];
        auto index_of = [&](const std::string& name) {
          return static_cast<int32_t>(Find(lo, name) - lo.kernels.begin());
        };
        for (const auto& [collective, gemm] : std::vector<std::pair<std::string, std::string>>{
                 {"ln2.allgather", "shared.fc1"}, {"fc2.reduce", "shared.fc2"},
                 {"fc2.reduce.bwd", "shared.fc2.dgrad"}, {"fc1.wgrad.allgather", "shared.fc1.dgrad"},
                 {"fc1.dgrad.reduce", "shared.fc1.wgrad"}}) {
          if (!shared) {
            EXPECT_EQ(Find(lo, collective), nullptr) << collective;
            continue;
          }
          ASSERT_NE(Find(lo, collective), nullptr) << collective;
          EXPECT_EQ(Find(lo, collective)->overlaps, index_of(gemm)) << collective;
        }
        EXPECT_EQ(Find(mo.layers[2], "ln2.allgather")->overlaps,
                  static_cast<int32_t>(Find(mo.layers[2], "fc1") - mo.layers[2].kernels.begin()));
      }
    }
  }
}

// Megatron-Core's all-gather dispatcher: the et x e GPUs of the expert
// group each gather the group's tokens (et e S / t of them, each GPU's
// shard), select the copies routed to their experts (r S et / t, the same
// GEMMs as the all-to-all dispatcher's), scatter-add the outputs back into
// the gathered tokens and reduce-scatter them: four collectives of the
// gathered tokens over the group, no all-to-all, no expert-group gather of
// its own. Its traffic grows with e where the all-to-all's does not: at et =
// 1 each collective carries e / r times the all-to-all's bytes.
TEST(Moe, AllGatherDispatcherInClosedForm) {
  const double S = 2048, d = 4096, r = 2, t = 4, e = 2;
  for (const int et : {4, 1}) {
    for (const int ep : {1, 2, 8}) {
      SCOPED_TRACE(fmt::format("et {} e {}", et, ep));
      const TransformerSpec a2a = ExpertGroupSpec(2, et, ep);
      TransformerSpec ag = a2a;
      ag.dispatcher = MoeDispatcher::kAllGather;
      const Model ma = GenerateTransformer(a2a), mg = GenerateTransformer(ag);
      const Layer &la = ma.layers[1], &lg = mg.layers[1];
      const double group = et * ep, gathered = group * S / t, copies = r * S * et / t;
      // The same expert GEMMs under either dispatcher: the copies routed to this GPU's experts.
      for (const Layer* l : {&la, &lg}) {
        EXPECT_DOUBLE_EQ(Find(*l, "experts.fc1")->m * Find(*l, "experts.fc1")->batch, copies);
        EXPECT_DOUBLE_EQ(Find(*l, "experts.fc2.wgrad")->k * Find(*l, "experts.fc2.wgrad")->batch, copies);
      }
      EXPECT_DOUBLE_EQ(Find(lg, "permute")->bytes, 2 * copies * d * e);
      EXPECT_DOUBLE_EQ(Find(lg, "unpermute")->bytes, gathered * d * e + 3 * copies * d * e);
      for (const char* name : {"experts.gather", "experts.reduce", "experts.sort", "experts.unsort"}) {
        EXPECT_EQ(Find(lg, name), nullptr) << name;
      }
      int collectives = 0;
      for (const Kernel& k : lg.kernels) {
        if (k.collective == Kernel::Collective::kNone ||
            (!k.name.starts_with("dispatch") && !k.name.starts_with("combine"))) {
          continue;
        }
        ++collectives;
        EXPECT_NE(k.collective, Kernel::Collective::kAllToAll) << k.name;
        // Without expert parallelism the group is the et GPUs of the tensor-parallel group.
        EXPECT_EQ(k.over, ep > 1 ? Kernel::Over::kExpert : Kernel::Over::kTensor) << k.name;
        EXPECT_DOUBLE_EQ(k.group, group) << k.name;
        EXPECT_DOUBLE_EQ(k.bytes, gathered * d * e) << k.name;
      }
      EXPECT_EQ(collectives, group > 1 ? 4 : 0);
      if (group > 1) {
        EXPECT_EQ(Find(lg, "dispatch")->collective, Kernel::Collective::kAllGather);
        EXPECT_EQ(Find(lg, "combine")->collective, Kernel::Collective::kReduceScatter);
        EXPECT_EQ(Find(lg, "combine.bwd")->collective, Kernel::Collective::kAllGather);
        EXPECT_EQ(Find(lg, "dispatch.bwd")->collective, Kernel::Collective::kReduceScatter);
      }
      if (et == 1 && ep > 1) {
        EXPECT_DOUBLE_EQ(Find(lg, "dispatch")->bytes / Find(la, "dispatch")->bytes, ep / r);
      }
      // What a paired F/B op can hide: the dispatcher's collectives over the expert group.
      const Device& h100 = *FindDevice("H100-SXM");
      const Link& nv = *FindLink("nvlink4");
      const CollectiveLinks links{.intra = &nv, .inter = &nv};
      double expected = 0;
      for (const char* name : {"dispatch", "combine"}) {
        if (const Kernel* k = Find(lg, name); k && ep > 1) expected += KernelTime(*k, 1, h100, Dtype::kBf16, 1, links);
      }
      EXPECT_DOUBLE_EQ(LayerAllToAllTime(lg, ir::OpKind::kForward, h100, Dtype::kBf16, 1, links), expected);
      if (ep > 1) {
        EXPECT_GT(expected, 0);
      }
    }
  }
  auto config = [](const std::string& model_extra) {
    return LoadConfig(R"({"model": {"generator": "transformer", "layers": 2, "d_model": 64, "heads": 4, "seq": 16,
      "vocab": 100)" + model_extra + R"(}, "training": {"batch": 2, "microbatches": 2}, "pipeline": {"stages": 1},
      "cluster": {"device": "H100-SXM", "devices": 1}})", "m.json");
  };
  ASSERT_TRUE(config(R"(, "experts": 4, "dispatcher": "allgather")"));
  EXPECT_EQ(config(R"(, "experts": 4, "dispatcher": "allgather")")->transformer->dispatcher, MoeDispatcher::kAllGather);
  EXPECT_EQ(config(R"(, "experts": 4)")->transformer->dispatcher, MoeDispatcher::kAllToAll);
  auto bad = config(R"(, "experts": 4, "dispatcher": "flex")");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("/model/dispatcher"), std::string::npos) << bad.error().message;
  bad = config(R"(, "dispatcher": "allgather")");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("/model/dispatcher: describes the experts"), std::string::npos)
      << bad.error().message;
}

// Skewed dropless routing: the hot expert receives (1 + s) m tokens and
// each of the other E - 1 (1 - s / (E - 1)) m (m = S r / E); the busiest GPU
// of the expert-parallel group holds the hot expert beside E / e - 1 cold
// ones, and receives its tokens by the all-to-all. With every expert on each
// GPU (e = 1) its work is the mean whatever the skew: only the shapes move.
TEST(Moe, RoutingSkewLoadsTheBusiestGpu) {
  const double S = 2048, d = 4096, fe = 14336, E = 8, r = 2, sk = 1.5;
  for (const int ep : {1, 2, 8}) {
    SCOPED_TRACE(fmt::format("e {}", ep));
    TransformerSpec s = Mixtral8x7B(2);
    s.seq = 2048;
    s.expert_parallel = ep;
    TransformerSpec skewed = s;
    skewed.routing_skew = sk;
    const Model balanced_model = GenerateTransformer(s), skewed_model = GenerateTransformer(skewed);
    const Layer& b = balanced_model.layers[1];
    const Layer& k = skewed_model.layers[1];
    const double local = E / ep, hot = 1 + sk, cold = 1 - sk / (E - 1);
    const double load = (hot + (local - 1) * cold) / local;
    EXPECT_DOUBLE_EQ(skewed.BusiestExpertGpuLoad(), load);
    const double m = S * r / E * ep;  // the mean tokens per expert on a GPU
    ASSERT_NE(Find(k, "experts.fc1.hot"), nullptr);
    EXPECT_DOUBLE_EQ(Find(k, "experts.fc1.hot")->m, m * hot);
    EXPECT_DOUBLE_EQ(Find(k, "experts.fc1.hot")->batch, 1);
    if (local > 1) {
      EXPECT_DOUBLE_EQ(Find(k, "experts.fc1")->m, m * cold);
      EXPECT_DOUBLE_EQ(Find(k, "experts.fc1")->batch, local - 1);
      EXPECT_EQ(Find(k, "experts.fc1")->launches, 0);  // more groups of the hot expert's grouped kernel
    } else {
      EXPECT_EQ(Find(k, "experts.fc1"), nullptr);
    }
    // The experts' FLOPs: the balanced ones times the busiest GPU's load.
    const double expert_flops = 2 * 3 * S * r * d * fe;  // gate, up and down over the S r routed copies, per GPU's share
    EXPECT_NEAR(PassFlops(k, Kernel::Pass::kForward) - PassFlops(b, Kernel::Pass::kForward),
                expert_flops * (load - 1), 1e-9 * expert_flops);
    EXPECT_NEAR(k.fwd_flops - b.fwd_flops, expert_flops * (load - 1), 1e-9 * expert_flops);
    if (ep == 1) {
      EXPECT_DOUBLE_EQ(load, 1);
    } else if (ep == 8) {
      EXPECT_DOUBLE_EQ(load, hot);
    }
    for (const Kernel& x : k.kernels) {
      if (x.collective == Kernel::Collective::kAllToAll) {
        EXPECT_DOUBLE_EQ(x.bytes, r * S * d * 2 * load) << x.name;
      }
    }
    // The busiest GPU keeps its routed copies: more stash where it receives more.
    if (load > 1) {
      EXPECT_GT(k.stash_bytes, b.stash_bytes);
    } else {
      EXPECT_DOUBLE_EQ(k.stash_bytes, b.stash_bytes);
    }
  }
  // Bad values named by their path.
  for (const auto& [model, message] : std::vector<std::pair<std::string, std::string>>{
           {R"("experts": 8, "routing_skew": 7.5)", "/model/routing_skew: expected a number >= 0 and at most 7, got 7.5"},
           {R"("experts": 8, "capacity_factor": 1.0, "routing_skew": 0.5)",
            "/model/routing_skew: skews dropless routing; with /model/capacity_factor 1 every expert runs its padded "
            "capacity"},
           {R"("routing_skew": 0.5)", "/model/routing_skew: describes the experts of a mixture of experts"}}) {
    const std::string text = R"({"model": {"generator": "transformer", "layers": 2, "d_model": 64, "heads": 4,
      "seq": 16, "vocab": 100, )" + model + R"(}, "training": {"batch": 2}, "pipeline": {"stages": 1},
      "cluster": {"device": "H100-SXM", "devices": 1}})";
    auto c = LoadConfig(text, "m.json");
    ASSERT_FALSE(c) << model;
    EXPECT_NE(c.error().message.find(message), std::string::npos) << c.error().message;
  }
}

// An all-to-all: each rank sends (n - 1)/n of its buffer, 1/n to each peer;
// inside a node at the link's achievable rate; across nodes the peers of its
// node over `intra` and the others over `inter`, side by side.
TEST(Moe, AllToAllTime) {
  const Link nv{.name = "nv", .latency_s = 1e-6, .bandwidth = 400e9, .collective_efficiency = 0.5};
  const Link ib{.name = "ib", .latency_s = 5e-6, .bandwidth = 50e9, .collective_efficiency = 0.8};
  const double bytes = 64e6;
  EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kAllToAll, bytes, 8, nv), 7.0 / 8 * bytes / 200e9 + 7e-6);
  // 16 ranks on 2 nodes: 7 peers over NVLink, 8 over InfiniBand (the slower side).
  const double two_nodes = CollectiveTime(Kernel::Collective::kAllToAll, bytes,
                                          {.ranks = 16, .nodes = 2, .intra = &nv, .inter = &ib});
  EXPECT_DOUBLE_EQ(two_nodes, std::max(7.0 / 16 * bytes / 200e9, 8.0 / 16 * bytes / 40e9) + 7 * 1e-6 + 8 * 5e-6);
  EXPECT_DOUBLE_EQ(CollectiveTime(Kernel::Collective::kAllToAll, bytes, 1, nv), 0);
}

// Where the expert-parallel group sits (Megatron-Core: tensor, context,
// expert, data): e of the GPUs holding the same other weights, so with t = 4
// on nodes of 8, e = 2 stays in a node and e = 4 spans two.
TEST(Moe, ExpertGroupPlacementAndBadValues) {
  auto config = [](int ep) {
    return fmt::format(R"({{
      "model": {{"generator": "transformer", "layers": 4, "d_model": 512, "ffn": 2048, "heads": 8, "seq": 128,
                 "vocab": 1024, "experts": 8, "top_k": 2}},
      "training": {{"batch": 8, "microbatches": 4}},
      "pipeline": {{"stages": 1, "tensor_parallel": 4, "sequence_parallel": true, "expert_parallel": {}}},
      "cluster": {{"device": "H100-SXM", "devices": 16, "gpus_per_node": 8, "link": "nvlink4",
                   "inter_node_link": "ib-ndr"}}
    }})", ep);
  };
  const Config two = LoadConfig(config(2), "moe.json").value(), four = LoadConfig(config(4), "moe.json").value();
  EXPECT_EQ(two.ExpertNodes(), 1);
  EXPECT_EQ(four.ExpertNodes(), 2);
  EXPECT_EQ(LinksOf(four).expert_nodes, 2);
  EXPECT_EQ(four.transformer->expert_parallel, 4);
  auto error = [&](int ep) {
    auto r = LoadConfig(config(ep), "moe.json");
    return r ? std::string("accepted") : r.error().message;
  };
  EXPECT_NE(error(3).find("/pipeline/expert_parallel: 3 GPUs do not divide the 8 experts"), std::string::npos);
  EXPECT_NE(error(8).find("/pipeline/expert_parallel: an expert-parallel group of 8 GPUs"), std::string::npos);
  auto dense = LoadConfig(R"({
      "model": {"generator": "transformer", "layers": 4, "d_model": 512, "ffn": 2048, "heads": 8, "seq": 128,
                "vocab": 1024},
      "training": {"batch": 8, "microbatches": 4},
      "pipeline": {"stages": 1, "expert_parallel": 2},
      "cluster": {"device": "H100-SXM", "devices": 4}
    })", "dense.json");
  ASSERT_FALSE(dense);
  EXPECT_NE(dense.error().message.find("/pipeline/expert_parallel"), std::string::npos);
}

// FP8 (Transformer Engine's grouped or per-expert linears): every one of the
// experts' GEMMs, forward, input gradient and weight gradient, runs in FP8,
// with the launches of the BF16 block's (one grouped kernel, or one per
// local expert), balanced and skewed.
TEST(Moe, Fp8RunsEveryExpertGemmInFp8) {
  for (const bool grouped : {true, false}) {
    for (const double skew : {0.0, 0.5}) {
      SCOPED_TRACE(fmt::format("grouped {} skew {}", grouped, skew));
      TransformerSpec s = Mixtral8x7B(2);
      s.seq = 2048;
      s.expert_parallel = 2;  // 4 local experts
      s.grouped_gemm = grouped;
      s.routing_skew = skew;
      TransformerSpec f = s;
      f.dtype = Dtype::kFp8;
      const Model bf16 = GenerateTransformer(s), fp8 = GenerateTransformer(f);
      int expert_gemms = 0;
      for (const Kernel& k : fp8.layers[1].kernels) {
        if (!k.gemm || k.name.rfind("experts.", 0) != 0) continue;
        SCOPED_TRACE(k.name);
        ++expert_gemms;
        EXPECT_TRUE(k.fp8);
        const Kernel* b = Find(bf16.layers[1], k.name);
        ASSERT_NE(b, nullptr);
        EXPECT_FALSE(b->fp8);
        EXPECT_EQ(k.launches, b->launches);
        const bool cold = skew > 0 && k.name.find(".hot") == std::string::npos;
        EXPECT_EQ(k.launches, grouped ? (cold ? 0 : 1) : (skew > 0 ? (cold ? 3 : 1) : 4));
      }
      EXPECT_EQ(expert_gemms, (skew > 0 ? 2 : 1) * 3 * 2);  // fc1 and fc2: F, I and W each
    }
  }
}

// Expert tensor parallelism et < t: each GPU holds E / e whole-er experts
// (f_e / et wide) and runs them over its share et / t of the routed tokens:
// the same FLOPs, the experts' weights split by et, not t; the group of e
// steps through the tensor-parallel group's GPUs first (nodes of 8, t = 4:
// e = 8 at et = 1 is one node, at et = 4 four).
TEST(Moe, ExpertTensorParallelism) {
  TransformerSpec s = Mixtral8x7B(2);
  s.seq = 2048;
  s.tensor_parallel = 4;
  s.sequence_parallel = true;
  s.expert_parallel = 8;
  TransformerSpec s1 = s;
  s1.expert_tensor_parallel = 1;
  const Model a = GenerateTransformer(s), b = GenerateTransformer(s1);
  const Layer &ba = a.layers[1], &bb = b.layers[1];
  EXPECT_DOUBLE_EQ(bb.fwd_flops, ba.fwd_flops);
  const double S = 2048, d = 4096, fe = 14336, r = 2, e = 2;
  EXPECT_DOUBLE_EQ(bb.params - ba.params, 1 * 3 * d * fe - 1 * 3 * d * fe / 4);  // one expert per GPU
  EXPECT_DOUBLE_EQ(Find(bb, "experts.fc1")->n, 2 * fe);
  EXPECT_DOUBLE_EQ(Find(bb, "experts.fc1")->m, r * S / 4);
  EXPECT_DOUBLE_EQ(Find(bb, "permute")->bytes, S * d * e * (1 + r) / 4);
  EXPECT_DOUBLE_EQ(ba.stash_bytes - bb.stash_bytes, S * d * 4 * r * (1 - 1.0 / 4));
  auto config = [](int et) {
    return fmt::format(R"({{
      "model": {{"generator": "transformer", "layers": 4, "d_model": 512, "ffn": 2048, "heads": 8, "seq": 128,
                 "vocab": 1024, "experts": 8, "top_k": 2}},
      "training": {{"batch": 8, "microbatches": 4}},
      "pipeline": {{"stages": 1, "tensor_parallel": 4, "sequence_parallel": true, "expert_parallel": 8,
                   "expert_tensor_parallel": {}}},
      "cluster": {{"device": "H100-SXM", "devices": 32, "gpus_per_node": 8, "link": "nvlink4",
                   "inter_node_link": "ib-ndr"}}
    }})", et);
  };
  EXPECT_EQ(LoadConfig(config(1), "moe.json").value().ExpertNodes(), 1);
  EXPECT_EQ(LoadConfig(config(4), "moe.json").value().ExpertNodes(), 4);
  auto bad = LoadConfig(config(3), "moe.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("/pipeline/expert_tensor_parallel: expected a divisor of tensor_parallel 4"),
            std::string::npos);
}

}  // namespace
}  // namespace twinpipe::cost
