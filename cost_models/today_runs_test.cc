// Today's runs in the cost model (issue 36): FP8 GEMMs, context parallelism,
// tensor-parallel communication beside its GEMMs and sharded data
// parallelism, each against a closed form (the FP8 peak, the 1/c split of
// tokens, ZeRO's memory per GPU, Megatron-Core's rank order) or an
// inequality that must hold (an overlap never makes an op longer), and the
// config's validation of each key.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cost_models/compute_model.h"
#include "cost_models/config.h"
#include "cost_models/generators.h"
#include "cost_models/plan_costs.h"

namespace twinpipe::cost {
namespace {

TransformerSpec Llama(Dtype dtype = Dtype::kBf16) {
  return {.layers = 2, .d_model = 4096, .ffn = 14336, .heads = 32, .seq = 8192, .vocab = 128256, .causal = true,
          .dtype = dtype, .kv_heads = 8, .mlp = MlpKind::kSwiglu, .norm = NormKind::kRmsNorm,
          .position = PositionKind::kRope, .bias = false, .attention = AttentionKind::kFused};
}

const Kernel& Named(const Layer& l, const std::string& name) {
  for (const Kernel& k : l.kernels) {
    if (k.name == name) return k;
  }
  ADD_FAILURE() << "no kernel " << name << " in " << l.name;
  static const Kernel none;
  return none;
}

bool Has(const Layer& l, const std::string& name) {
  for (const Kernel& k : l.kernels) {
    if (k.name == name) return true;
  }
  return false;
}

TEST(Fp8, TheLinearsGemmsRunAtTheFp8PeakAndAttentionStaysBf16) {
  // The tiles' math alone (the epilogue's BF16 store is the same in both
  // precisions: KernelModel.ATilesStoreFollowsItsMathWhereTheDeviceSaysSo).
  Device h100 = *FindDevice("H100-SXM");
  h100.epilogue_store = 0;
  EXPECT_DOUBLE_EQ(h100.fp8_flops, 2 * h100.half_flops);  // the data sheet's 1,979 and 989.5 dense TFLOPS
  EXPECT_DOUBLE_EQ(FindDevice("H200")->fp8_flops, 1979e12);
  EXPECT_DOUBLE_EQ(FindDevice("H100-PCIe")->fp8_flops, 1513e12);
  EXPECT_EQ(FindDevice("A100-80GB")->fp8_flops, 0);
  const Layer bf16 = GenerateTransformer(Llama()).layers[1], fp8 = GenerateTransformer(Llama(Dtype::kFp8)).layers[1];
  EXPECT_EQ(bf16.fwd_flops, fp8.fwd_flops);  // the same work, at another rate
  for (const char* gemm : {"qkv", "proj", "fc1", "fc2", "qkv.dgrad", "fc2.wgrad"}) {
    SCOPED_TRACE(gemm);
    EXPECT_TRUE(Named(fp8, gemm).fp8);
    // Large and aligned: compute-bound, so exactly the ratio of the peaks at
    // their fractions (the FP8 one fp8_gemm_ratio of the BF16 one).
    // (A weight gradient's fp32 accumulation store is the same bytes in both.)
    const Kernel& kb = Named(bf16, gemm);
    const GemmShape shape = ShapeFor(kb, 1);
    const double store = kb.pass == Kernel::Pass::kWeight ? 4 * shape.m * shape.n * shape.batch /
                                                                (h100.memory_bandwidth * h100.bandwidth_efficiency)
                                                          : 0;
    const double b = KernelTime(kb, 1, h100, Dtype::kBf16, 0.8) - store;
    const double f = KernelTime(Named(fp8, gemm), 1, h100, Dtype::kFp8, 0.8) - store;
    EXPECT_NEAR(f / (b * h100.half_flops / (h100.fp8_flops * h100.fp8_gemm_ratio)), 1, 1e-12);
  }
  EXPECT_FALSE(Named(fp8, "flash_attn").fp8);
  EXPECT_EQ(KernelTime(Named(fp8, "flash_attn"), 1, h100, Dtype::kFp8, 0.8),
            KernelTime(Named(bf16, "flash_attn"), 1, h100, Dtype::kBf16, 0.8));
  // Transformer Engine's casts: input and output gradient with a transposed
  // copy, 4 bytes an element; QKV's and FC1's inputs come from the norm
  // before them (LayerNormLinear), which writes them in FP8 with their
  // transposes (not gathered: t = 1): read 2, write 1 + 1.
  const double S = 8192, d = 4096;
  EXPECT_FALSE(Has(fp8, "qkv.cast"));
  EXPECT_FALSE(Has(fp8, "fc1.cast"));
  EXPECT_FALSE(Has(fp8, "qkv.transpose"));
  EXPECT_DOUBLE_EQ(Named(fp8, "ln1").bytes, 4 * S * d);
  EXPECT_DOUBLE_EQ(Named(fp8, "ln2").bytes, 4 * S * d);
  EXPECT_DOUBLE_EQ(Named(bf16, "ln1").bytes, 4 * S * d);
  EXPECT_DOUBLE_EQ(Named(fp8, "proj.cast").bytes, 4 * S * d);
  EXPECT_DOUBLE_EQ(Named(fp8, "fc2.cast").bytes, 4 * S * 14336);
  EXPECT_DOUBLE_EQ(Named(fp8, "fc2.dgrad.cast").bytes, 4 * S * d);
  EXPECT_DOUBLE_EQ(Named(fp8, "qkv.dgrad.cast").bytes, 4 * S * (d + 2 * d / 4));
  EXPECT_FALSE(Has(bf16, "proj.cast"));
  // The head's vocabulary projection is not a Transformer Engine linear.
  EXPECT_FALSE(Named(GenerateTransformer(Llama(Dtype::kFp8)).layers.back(), "logits").fp8);
}

TEST(Fp8, SequenceParallelismGathersFp8Copies) {
  // Transformer Engine (v1.11 to v2.x) with sequence parallelism over t:
  // a LayerNormLinear's norm writes its shard in FP8 (read 2, write 1 per
  // element of S / t tokens), the shard is gathered in FP8 (S d bytes, half
  // of BF16's), gathered again for the weight gradient and that copy
  // transposed (read 1, write 1 of S tokens); a row-parallel linear's output
  // gradient is cast on its shard (read 2, write 1), gathered in FP8 and
  // transposed. The reduce-scatters stay in BF16.
  const double S = 8192, d = 4096, f = 14336;
  for (const double t : {2.0, 4.0, 8.0}) {
    SCOPED_TRACE(t);
    TransformerSpec spec = Llama(Dtype::kFp8);
    spec.tensor_parallel = static_cast<int>(t);
    spec.sequence_parallel = true;
    const Layer fp8 = GenerateTransformer(spec).layers[1];
    spec.dtype = Dtype::kBf16;
    const Layer bf16 = GenerateTransformer(spec).layers[1];
    for (const char* norm : {"ln1", "ln2"}) {
      EXPECT_DOUBLE_EQ(Named(fp8, norm).bytes, 3 * S / t * d);
      EXPECT_DOUBLE_EQ(Named(bf16, norm).bytes, 4 * S / t * d);
    }
    for (const char* gather : {"ln1.allgather", "ln2.allgather", "qkv.wgrad.allgather", "fc1.wgrad.allgather",
                               "proj.reduce.bwd", "fc2.reduce.bwd"}) {
      SCOPED_TRACE(gather);
      EXPECT_EQ(Named(fp8, gather).collective, Kernel::Collective::kAllGather);
      EXPECT_DOUBLE_EQ(Named(fp8, gather).bytes, S * d);
      EXPECT_DOUBLE_EQ(Named(bf16, gather).bytes, 2 * S * d);
    }
    for (const char* scatter : {"proj.reduce", "fc2.reduce", "qkv.dgrad.reduce", "fc1.dgrad.reduce"}) {
      EXPECT_DOUBLE_EQ(Named(fp8, scatter).bytes, Named(bf16, scatter).bytes);
    }
    EXPECT_FALSE(Has(fp8, "qkv.cast"));
    EXPECT_FALSE(Has(fp8, "fc1.cast"));
    EXPECT_DOUBLE_EQ(Named(fp8, "qkv.transpose").bytes, 2 * S * d);
    EXPECT_DOUBLE_EQ(Named(fp8, "fc1.transpose").bytes, 2 * S * d);
    EXPECT_EQ(Named(fp8, "fc1.transpose").pass, Kernel::Pass::kWeight);
    EXPECT_DOUBLE_EQ(Named(fp8, "proj.dgrad.cast").bytes, 3 * S / t * d);
    EXPECT_DOUBLE_EQ(Named(fp8, "fc2.dgrad.cast").bytes, 3 * S / t * d);
    EXPECT_DOUBLE_EQ(Named(fp8, "proj.dgrad.transpose").bytes, 2 * S * d);
    EXPECT_DOUBLE_EQ(Named(fp8, "fc2.dgrad.transpose").bytes, 2 * S * d);
    EXPECT_EQ(Named(fp8, "fc2.dgrad.transpose").pass, Kernel::Pass::kWeight);
    // The row-parallel inputs and column-parallel output gradients are not
    // gathered: each its own cast with a transposed copy.
    EXPECT_DOUBLE_EQ(Named(fp8, "proj.cast").bytes, 4 * S * d / t);
    EXPECT_DOUBLE_EQ(Named(fp8, "fc2.cast").bytes, 4 * S * f / t);
    EXPECT_DOUBLE_EQ(Named(fp8, "fc1.dgrad.cast").bytes, 4 * S * 2 * f / t);
    EXPECT_FALSE(Has(bf16, "qkv.transpose"));
    EXPECT_FALSE(Has(bf16, "proj.dgrad.transpose"));
    // Each cast and transpose is one call into Transformer Engine's C++
    // (one framework op for its launch); the rest are eager framework code's.
    int copies = 0;
    for (const Kernel& k : fp8.kernels) {
      const bool copy = k.name.ends_with(".cast") || k.name.ends_with(".transpose");
      copies += copy;
      EXPECT_EQ(k.framework_ops, copy ? 1 : kOpsPerKernel) << k.name;
    }
    EXPECT_EQ(copies, 10);  // qkv, fc1: transpose, dgrad.cast; proj, fc2: cast, dgrad.cast, dgrad.transpose
  }
  // An MoE block's shared experts gather their input and output gradient
  // themselves, in BF16 (Megatron-Core's SharedExpertMLP): their FC1 keeps
  // its cast and the MLP's gathers their BF16 bytes; the attention is as in
  // a dense block.
  TransformerSpec moe = Llama(Dtype::kFp8);
  moe.tensor_parallel = 4;
  moe.sequence_parallel = true;
  moe.experts = 8;
  moe.top_k = 2;
  moe.shared_experts = 1;
  const Layer m = GenerateTransformer(moe).layers[1];
  EXPECT_DOUBLE_EQ(Named(m, "ln2.allgather").bytes, 2 * S * d);
  EXPECT_DOUBLE_EQ(Named(m, "fc2.reduce.bwd").bytes, 2 * S * d);
  EXPECT_DOUBLE_EQ(Named(m, "ln2").bytes, 4 * S / 4 * d);
  EXPECT_TRUE(Has(m, "shared.fc1.cast"));
  EXPECT_FALSE(Has(m, "shared.fc2.dgrad.transpose"));
  EXPECT_DOUBLE_EQ(Named(m, "ln1.allgather").bytes, S * d);
  EXPECT_DOUBLE_EQ(Named(m, "proj.reduce.bwd").bytes, S * d);
}

TEST(Fp8, TheStashKeepsTheLinearsInputsAsFp8Casts) {
  // Per S d, in 16-bit units: QKV, FC1 and projection inputs 2 each, FC2's 2f/d; FP8 halves them.
  const double S = 8192, d = 4096, f = 14336;
  const double bf16 = GenerateTransformer(Llama()).layers[1].stash_bytes;
  const double fp8 = GenerateTransformer(Llama(Dtype::kFp8)).layers[1].stash_bytes;
  EXPECT_NEAR(bf16 - fp8, S * d * (3 + f / d), 1e-6 * bf16);
  // The block's whole stash from its parts (flash attention, SwiGLU, no
  // dropout of attention scores): norms' inputs 4, QKV and FC1 inputs 4,
  // two dropout masks 2, Q 2, K and V 4 kv/d, projection input 2, SwiGLU's
  // gate and up 4f/d and their product 2f/d.
  const double kv = d * 8 / 32;
  EXPECT_NEAR(bf16, S * d * (4 + 4 + 2 + 2 + 4 * kv / d + 2 + 6 * f / d), 1e-6 * bf16);
}

TEST(ContextParallel, EveryGpuTakesAShareOfTheTokensAndOfTheAttention) {
  const Model one = GenerateTransformer(Llama());
  for (int c : {2, 4, 8}) {
    SCOPED_TRACE(c);
    TransformerSpec spec = Llama();
    spec.context_parallel = c;
    const Model m = GenerateTransformer(spec);
    for (size_t i = 0; i < m.layers.size(); ++i) {
      EXPECT_NEAR(m.layers[i].fwd_flops * c, one.layers[i].fwd_flops, 1e-9 * one.layers[i].fwd_flops);
      EXPECT_NEAR(m.layers[i].bwd_input_flops * c, one.layers[i].bwd_input_flops,
                  1e-9 * one.layers[i].bwd_input_flops);
      EXPECT_NEAR(m.layers[i].stash_bytes * c, one.layers[i].stash_bytes, 1e-9 * one.layers[i].stash_bytes);
      if (i + 1 < m.layers.size()) {  // the head's output is the loss
        EXPECT_NEAR(m.layers[i].out_bytes * c, one.layers[i].out_bytes, 1e-9 * one.layers[i].out_bytes);
      }
      EXPECT_EQ(m.layers[i].params, one.layers[i].params);
    }
    const Layer& block = m.layers[1];
    // The ring: all S tokens' K and V (2 S kv e), beside the attention kernel, in c steps.
    const Kernel& ring = Named(block, "cp.kv");
    EXPECT_EQ(ring.collective, Kernel::Collective::kAllGather);
    EXPECT_EQ(ring.over, Kernel::Over::kContext);
    EXPECT_EQ(ring.group, c);
    EXPECT_DOUBLE_EQ(ring.bytes, 2.0 * 8192 * 1024 * 2);
    EXPECT_EQ(block.kernels.begin()[ring.overlaps].name, "flash_attn");
    EXPECT_EQ(Named(block, "flash_attn").launches, c);
    // In the backward the K and V pass around again and their gradients
    // come back (a reduce-scatter of the same bytes), both beside the
    // attention's backward kernel, wholly hidden (exposed 0).
    for (const char* name : {"cp.kv.bwd", "cp.dkv"}) {
      SCOPED_TRACE(name);
      const Kernel& back = Named(block, name);
      EXPECT_EQ(back.pass, Kernel::Pass::kInput);
      EXPECT_EQ(back.over, Kernel::Over::kContext);
      EXPECT_EQ(back.group, c);
      EXPECT_DOUBLE_EQ(back.bytes, ring.bytes);
      EXPECT_EQ(block.kernels.begin()[back.overlaps].name, "flash_attn.bwd");
      EXPECT_EQ(back.exposed, 0);
    }
    EXPECT_EQ(Named(block, "cp.kv.bwd").collective, Kernel::Collective::kAllGather);
    EXPECT_EQ(Named(block, "cp.dkv").collective, Kernel::Collective::kReduceScatter);
    // Timed: the input-gradient op takes Overlapped(attention backward,
    // ring) for the pair, max(attention + x min(ring, attention), ring) with x the H100's
    // overlap interference, so taking the ring's link away changes it by
    // what shows.
    const Device& h100 = *FindDevice("H100-SXM");
    const Link& nvlink = *FindLink("nvlink4");
    const CollectiveLinks links{.intra = &nvlink, .inter = &nvlink};
    const double attention = KernelTime(Named(block, "flash_attn.bwd"), 1, h100, Dtype::kBf16, 0.8);
    const double passes = KernelTime(Named(block, "cp.kv.bwd"), 1, h100, Dtype::kBf16, 0.8, links) +
                          KernelTime(Named(block, "cp.dkv"), 1, h100, Dtype::kBf16, 0.8, links);
    EXPECT_GT(passes, 0);
    const double with_ring = LayerOpTime(block, ir::OpKind::kBackwardInput, h100, Dtype::kBf16, 0.8, 1, links);
    Layer alone = block;
    std::vector<Kernel> kept;
    for (const Kernel& k : block.kernels) {
      if (k.over != Kernel::Over::kContext) kept.push_back(k);
    }
    // (Dropping kernels shifts the overlap indices: re-point those beside a GEMM.)
    for (Kernel& k : kept) {
      if (k.overlaps >= 0) {
        const std::string target = block.kernels.begin()[k.overlaps].name;
        k.overlaps = static_cast<int32_t>(
            std::find_if(kept.begin(), kept.end(), [&](const Kernel& x) { return x.name == target; }) - kept.begin());
      }
    }
    alone.kernels = std::move(kept);
    const double without = LayerOpTime(alone, ir::OpKind::kBackwardInput, h100, Dtype::kBf16, 0.8, 1, links);
    const double x = h100.overlap_interference;
    EXPECT_GT(x, 0);
    const double overlapped = std::max(attention + x * std::min(passes, attention), passes);
    EXPECT_NEAR(with_ring - without, overlapped - attention, 1e-9 * with_ring);
  }
}

TEST(Overlap, AGemmSlowsByAtMostItsOwnShareBesideACollective) {
  // A collective beside a GEMM slows it only while the two run together:
  // the pair takes g + x h while the collective is the shorter (the regime
  // FLUX measured), max((1 + x) g, h) once it outlasts the GEMM. Checked on
  // a grid against those two closed forms and against the bounds any
  // overlap must keep: no shorter than either alone, no longer than both in
  // series, and never shorter for a longer GEMM or collective.
  Device d = *FindDevice("H100-SXM");
  const std::vector<double> grid{0, 1e-6, 0.25, 0.5, 0.99, 1, 1.01, 2, 4, 100};
  for (double x : {0.0, 0.3, d.overlap_interference, 1.0}) {
    d.overlap_interference = x;
    for (double g : grid) {
      for (double h : grid) {
        SCOPED_TRACE(fmt::format("x={} g={} h={}", x, g, h));
        const double o = Overlapped(g, h, d);
        EXPECT_DOUBLE_EQ(o, h <= g ? g + x * h : std::max((1 + x) * g, h));
        EXPECT_GE(o, std::max(g, h));
        EXPECT_LE(o, g + h);
        for (double more : {0.1, 3.0}) {
          EXPECT_GE(Overlapped(g + more, h, d), o);
          EXPECT_GE(Overlapped(g, h + more, d), o);
        }
      }
    }
  }
  // At the Hopper profiles' x, a GEMM half its collective's length is
  // hidden entirely: the pair takes the collective's time, where lengthening
  // the GEMM by x h would have charged 1.27 h.
  d.overlap_interference = FindDevice("H100-SXM")->overlap_interference;
  EXPECT_DOUBLE_EQ(Overlapped(0.5, 1, d), 1);
}

TEST(Overlap, ACollectiveBesideItsGemmNeverMakesAnOpLonger) {
  const Link& nvlink = *FindLink("nvlink4");
  for (int t : {2, 4, 8}) {
    for (Dtype dtype : {Dtype::kBf16, Dtype::kFp8}) {
      TransformerSpec serial = Llama(dtype);
      serial.tensor_parallel = t;
      serial.sequence_parallel = true;
      TransformerSpec beside = serial;
      beside.tp_comm_overlap = true;
      const Model a = GenerateTransformer(serial), b = GenerateTransformer(beside);
      for (ir::OpKind kind : {ir::OpKind::kForward, ir::OpKind::kBackward, ir::OpKind::kBackwardInput,
                              ir::OpKind::kBackwardWeight}) {
        for (double samples : {1.0, 4.0}) {
          SCOPED_TRACE(fmt::format("t={} {} {} b={}", t, DtypeName(dtype), ir::OpKindName(kind), samples));
          const Device& h100 = *FindDevice("H100-SXM");
          const double s = LayerOpTime(a.layers[1], kind, h100, dtype, 0.8, samples, &nvlink);
          const double o = LayerOpTime(b.layers[1], kind, h100, dtype, 0.8, samples, &nvlink);
          EXPECT_LE(o, s * (1 + 1e-12));  // equal where nothing hides (W: its collectives' GEMMs run in I)
          // Without collectives (no link) the two are the same block.
          EXPECT_EQ(LayerOpTime(a.layers[1], kind, h100, dtype, 0.8, samples),
                    LayerOpTime(b.layers[1], kind, h100, dtype, 0.8, samples));
        }
      }
      // The forward's four collectives run beside their GEMMs: a pair takes
      // max(GEMM + x min(h, GEMM), h) + collective / t, h = (1 - 1/t) x collective its
      // hidden share and x the device's overlap interference, where in
      // series it took GEMM + collective: all of it hidden at x = 0,
      // nothing at x = 1.
      for (double x : {0.0, FindDevice("H100-SXM")->overlap_interference, 0.5, 1.0}) {
        Device h100 = *FindDevice("H100-SXM");
        h100.overlap_interference = x;
        double saved = 0;
        bool each_gemm_longer = true;  // every hidden share within its GEMM
        for (const auto& [g, c] : {std::pair{"qkv", "ln1.allgather"}, {"proj", "proj.reduce"},
                                   {"fc1", "ln2.allgather"}, {"fc2", "fc2.reduce"}}) {
          const double gemm = KernelTime(Named(b.layers[1], g), 1, h100, dtype, 0.8);
          const double comm = KernelTime(Named(b.layers[1], c), 1, h100, dtype, 0.8, {.intra = &nvlink});
          EXPECT_EQ(b.layers[1].kernels.begin()[Named(b.layers[1], c).overlaps].name, g);
          const double hidden = comm * (1 - 1.0 / t);
          each_gemm_longer = each_gemm_longer && hidden <= gemm;
          saved += gemm + comm - (std::max(gemm + x * std::min(hidden, gemm), hidden) + comm / t);
        }
        const double serial_f = LayerOpTime(a.layers[1], ir::OpKind::kForward, h100, dtype, 0.8, 1, &nvlink);
        const double beside_f = LayerOpTime(b.layers[1], ir::OpKind::kForward, h100, dtype, 0.8, 1, &nvlink);
        SCOPED_TRACE(fmt::format("t={} {} x={}", t, DtypeName(dtype), x));
        EXPECT_NEAR(serial_f - beside_f, saved, 1e-9 * serial_f);
        if (x < 1) {
          EXPECT_GT(saved, 0);
        } else if (each_gemm_longer) {
          EXPECT_NEAR(beside_f, serial_f, 1e-12 * serial_f);  // x = 1: in series
        } else {
          EXPECT_GT(saved, 0);  // x = 1 and a collective outlasting its GEMM: (1 + x) GEMM < GEMM + collective
        }
      }
    }
  }
}

TEST(Overlap, TheOutputLayersBackwardCollectivesHideBehindItsGemms) {
  // Megatron's output layer gathers its input for the weight gradient beside
  // the data-gradient GEMM and reduce-scatters that gradient beside the
  // weight-gradient GEMM: with tensor-parallel overlap its backward takes
  // max(g + x min(c, g), c) for each pair where in series it took g + c. Split into
  // I and W (zero bubble), each collective's GEMM runs in the other op: both
  // in series, as before.
  const Link& nvlink = *FindLink("nvlink4");
  const Device& h100 = *FindDevice("H100-SXM");
  const double x = h100.overlap_interference;
  for (int t : {2, 4, 8}) {
    for (Dtype dtype : {Dtype::kBf16, Dtype::kFp8}) {
      SCOPED_TRACE(fmt::format("t={} {}", t, DtypeName(dtype)));
      TransformerSpec serial = Llama(dtype);
      serial.tensor_parallel = t;
      serial.sequence_parallel = true;
      TransformerSpec beside = serial;
      beside.tp_comm_overlap = true;
      const Layer a = GenerateTransformer(serial).layers.back(), b = GenerateTransformer(beside).layers.back();
      ASSERT_EQ(b.kind, "head");
      double saved = 0;
      for (const auto& [g, c] : {std::pair{"logits.dgrad", "logits.wgrad.allgather"},
                                 {"logits.wgrad", "logits.dgrad.reduce"}}) {
        ASSERT_GE(Named(b, c).overlaps, 0) << c;
        EXPECT_EQ(b.kernels.begin()[Named(b, c).overlaps].name, g);
        EXPECT_EQ(Named(a, c).overlaps, Kernel::kInSeries);
        const double gemm = KernelTime(Named(b, g), 1, h100, dtype, 0.8);
        const double comm = KernelTime(Named(b, c), 1, h100, dtype, 0.8, {.intra = &nvlink});
        saved += gemm + comm - std::max(gemm + x * std::min(comm, gemm), comm);
      }
      EXPECT_GT(saved, 0);
      const auto time = [&](const Layer& l, ir::OpKind kind) {
        return LayerOpTime(l, kind, h100, dtype, 0.8, 1, &nvlink);
      };
      EXPECT_NEAR(time(a, ir::OpKind::kBackward) - time(b, ir::OpKind::kBackward), saved,
                  1e-9 * time(a, ir::OpKind::kBackward));
      for (ir::OpKind kind : {ir::OpKind::kForward, ir::OpKind::kBackwardInput, ir::OpKind::kBackwardWeight}) {
        EXPECT_DOUBLE_EQ(time(b, kind), time(a, kind)) << ir::OpKindName(kind);
      }
    }
  }
}

TEST(Sharding, MemoryPerGpuEqualsZerosFormulas) {
  // ZeRO (Rajbhandari et al. 2020), Figure 1: a 7.5B-parameter model with
  // mixed-precision Adam (K = 12) on 64 GPUs holds 120 GB per GPU as plain
  // data parallelism, 31.4 GB with the optimizer state sharded (P_os), and
  // 1.88 GB with everything sharded (P_os+g+p).
  const double psi = 7.5e9, N = 64;
  TrainingConfig training;
  training.bytes_per_param = 16;  // fp16 weights and gradients 2 + 2, K = 12
  EXPECT_DOUBLE_EQ(OptimizerStateBytes("adam", Dtype::kFp16), 12);
  EXPECT_DOUBLE_EQ(OptimizerStateBytes("adam", Dtype::kFp32), 8);
  EXPECT_DOUBLE_EQ(StaticBytesPerGpu(training, Dtype::kFp16, DataParallelSharding::kNone, N, psi, 0, 0), 120e9);
  EXPECT_NEAR(StaticBytesPerGpu(training, Dtype::kFp16, DataParallelSharding::kOptimizer, N, psi, 0, 0),
              (2 + 2 + 12 / N) * psi, 1);
  EXPECT_NEAR(StaticBytesPerGpu(training, Dtype::kFp16, DataParallelSharding::kOptimizer, N, psi, 0, 0) / 1e9, 31.4,
              0.05);
  EXPECT_NEAR(StaticBytesPerGpu(training, Dtype::kFp16, DataParallelSharding::kFull, N, psi, 0, 0) / 1e9, 1.875, 1e-9);
  // Megatron's distributed optimizer table: bf16 weights, fp32 gradients: 6 + 12/d.
  training.bytes_per_param = 18;
  EXPECT_NEAR(StaticBytesPerGpu(training, Dtype::kBf16, DataParallelSharding::kOptimizer, 8, 1, 0, 0), 6 + 12.0 / 8,
              1e-12);
  // FSDP also holds the running and the prefetched layer, gathered, with their gradients.
  EXPECT_NEAR(StaticBytesPerGpu(training, Dtype::kBf16, DataParallelSharding::kFull, 8, 1e9, 0, 1e8),
              18e9 / 8 + 2 * 2 * 2 * 1e8, 1);
  // FP8: Transformer Engine's FP8 weights and their transposes beside the BF16 ones.
  EXPECT_DOUBLE_EQ(StaticBytesPerGpu(training, Dtype::kFp8, DataParallelSharding::kNone, 8, 1e9, 5e8, 0),
                   18e9 + 2 * 5e8);
}

TEST(Sharding, TheDistributedOptimizersCollectivesShowOnlyWhatTheyCannotHide) {
  PlanCosts c;
  c.compute_s = {{1.0, 2.0, 0.0, 0.0, 1.0}};
  c.step_s = {0.0};
  c.link = *FindLink("nvlink4");
  c.inter_node_link = *FindLink("ib-ndr");
  c.gradient_ranks = 8;
  c.stage_buckets = {10};
  const ir::Op all_reduce{.kind = ir::OpKind::kAllReduce, .stage = 0, .bytes = int64_t{1} << 30};
  const CollectiveGroup group{.ranks = 8, .nodes = 1, .intra = &c.link, .inter = &c.inter_node_link};
  const double plain = OpDuration(all_reduce, c, 8);
  EXPECT_DOUBLE_EQ(plain, CollectiveTime(Kernel::Collective::kAllReduce, 1 << 30, group));
  c.sharding = DataParallelSharding::kOptimizer;
  // 1 GiB over NVLink hides behind 1 s of forward and 2 s of backward: the last bucket of each shows.
  const double rs = CollectiveTime(Kernel::Collective::kReduceScatter, 1 << 30, group);
  const double ag = CollectiveTime(Kernel::Collective::kAllGather, 1 << 30, group);
  EXPECT_DOUBLE_EQ(OpDuration(all_reduce, c, 8), rs / 10 + ag / 10);
  EXPECT_LT(OpDuration(all_reduce, c, 8), plain);
  // A backward too short to hide it: the rest shows.
  c.compute_s = {{1e-3, 2e-3, 0.0, 0.0, 1e-3}};
  EXPECT_DOUBLE_EQ(OpDuration(all_reduce, c, 8), (rs - 2e-3) + (ag - 1e-3));
  c.sharding = DataParallelSharding::kFull;
  EXPECT_EQ(OpDuration(all_reduce, c, 8), 0);
}

Result<Config> Load(const std::string& model, const std::string& training, const std::string& pipeline,
                    const std::string& cluster, int devices = 32) {
  // The extras override the base's keys (nlohmann keeps the last of a key
  // given twice; the config reader would refuse it).
  return LoadConfig(nlohmann::json::parse(fmt::format(R"({{"model": {{"generator": "transformer", "layers": 4, "d_model": 1024,
      "heads": 16, "kv_heads": 8, "seq": 4096, "vocab": 32000, "dtype": "bf16", "causal": true,
      "attention": "fused"{}}},
    "training": {{"batch": 8, "microbatches": 4{}}},
    "pipeline": {{"stages": 2, "schedule": "1f1b"{}}},
    "cluster": {{"device": "H100-SXM", "devices": {}, "gpus_per_node": 8{}}}}})",
                                model, training, pipeline, devices, cluster)).dump(),
                    "today.json");
}

TEST(TodayConfig, ReadsTheKeysAndPlacesGpusInMegatronsOrder) {
  auto c = Load("", R"(, "data_parallel_sharding": "optimizer")",
                R"(, "tensor_parallel": 2, "sequence_parallel": true, "context_parallel": 2, "tp_comm_overlap": true)",
                R"(, "placement": "tp-cp-dp-pp")");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->Replicas(), 4);  // 32 GPUs / (2 stages x 2 x 2)
  EXPECT_EQ(c->GradientRanks(), 8);
  EXPECT_EQ(c->training.sharding, DataParallelSharding::kOptimizer);
  EXPECT_TRUE(c->transformer->tp_comm_overlap);
  EXPECT_EQ(c->transformer->context_parallel, 2);
  // tp-cp-dp-pp: GPU = t (cp + c (replica + R stage)).
  EXPECT_EQ(c->GpuOf(1, 0, 0), 2);
  EXPECT_EQ(c->GpuOf(0, 0, 1), 4);
  EXPECT_EQ(c->GpuOf(0, 1, 0), 16);
  EXPECT_EQ(c->NodeOf(1), 2);
  EXPECT_EQ(c->ContextNodes(), 1);
  EXPECT_EQ(c->GradientNodes(0), 2);  // 8 ranks over GPUs 0..14: two nodes
  auto pp_first = Load("", "", R"(, "tensor_parallel": 2, "context_parallel": 2)", "");
  ASSERT_TRUE(pp_first) << pp_first.error().message;
  EXPECT_EQ(pp_first->GpuOf(0, 1, 0), 4);  // tp-cp-pp-dp, the default
  EXPECT_EQ(pp_first->GpuOf(0, 0, 1), 8);
}

// The kept weight gradient (Megatron's main_grad): its precision by default
// is Megatron-LM's for the model's (fp16 for fp16, fp32 otherwise); the
// weight-gradient GEMMs add into it at its width, and the data-parallel
// reduction moves it (partition/plan_test.cc holds the bytes).
TEST(GradientDtype, DefaultsToMegatronsAndTheWeightGradientsAddIntoIt) {
  struct Case {
    std::string model;
    Dtype expected;
    int bytes;
  };
  for (const Case& k : std::vector<Case>{{"fp32", Dtype::kFp32, 4},
                                         {"tf32", Dtype::kFp32, 4},
                                         {"fp16", Dtype::kFp16, 2},
                                         {"bf16", Dtype::kFp32, 4},
                                         {"fp8", Dtype::kFp32, 4}}) {
    SCOPED_TRACE(k.model);
    auto c = Load(fmt::format(R"(, "dtype": "{}")", k.model), "", "", "");
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->training.gradient_dtype, k.expected);
    EXPECT_EQ(DefaultGradientDtype(c->model.dtype), k.expected);
    EXPECT_EQ(GradientAccumulationBytes(c->model.dtype), k.bytes);
  }
  auto fp32 = Load(R"(, "dtype": "bf16")", "", "", "");
  auto bf16 = Load(R"(, "dtype": "bf16")", R"(, "gradient_dtype": "bf16")", "", "");
  ASSERT_TRUE(fp32 && bf16);
  EXPECT_EQ(bf16->training.gradient_dtype, Dtype::kBf16);
  EXPECT_EQ(bf16->transformer->GradientDtype(), Dtype::kBf16);
  // Every weight-gradient GEMM keeps 2 bytes an element instead of 4; no
  // other kernel moves.
  const Device& h100 = *FindDevice("H100-SXM");
  int weight_gemms = 0;
  for (size_t i = 0; i < fp32->model.layers.size(); ++i) {
    const Layer &a = fp32->model.layers[i], &b = bf16->model.layers[i];
    ASSERT_EQ(a.kernels.size(), b.kernels.size());
    for (size_t j = 0; j < a.kernels.size(); ++j) {
      const Kernel &ka = a.kernels.begin()[j], &kb = b.kernels.begin()[j];
      SCOPED_TRACE(ka.name);
      const bool weight_gemm = ka.gemm && ka.pass == Kernel::Pass::kWeight;
      weight_gemms += weight_gemm;
      EXPECT_EQ(ka.accumulate_bytes, weight_gemm ? 4 : 0);
      EXPECT_EQ(kb.accumulate_bytes, weight_gemm ? 2 : 0);
      const double ta = KernelTime(ka, 1, h100, Dtype::kBf16, 0.8), tb = KernelTime(kb, 1, h100, Dtype::kBf16, 0.8);
      if (!weight_gemm) {
        EXPECT_EQ(ta, tb);
        continue;
      }
      // Compute-bound: the kept gradient's store after the K loop, m n x
      // its bytes at the achievable bandwidth, is what differs.
      const GemmShape g = ShapeFor(ka, 1);
      EXPECT_NEAR(ta - tb, 2 * g.m * g.n * g.batch / (h100.memory_bandwidth * h100.bandwidth_efficiency),
                  1e-9 * ta);
      // The same GEMM in fp16 training keeps fp16 by default: the same time.
      Kernel unset = ka;
      unset.accumulate_bytes = 0;
      EXPECT_DOUBLE_EQ(KernelTime(unset, 1, h100, Dtype::kFp16, 0.8), tb);
    }
  }
  EXPECT_GT(weight_gemms, 8);
}

TEST(TodayConfig, BadValuesNameTheirJsonPath) {
  struct Case {
    std::string model, training, pipeline, cluster, message;
    int devices = 32;
  };
  const Case cases[] = {
      {"", "", R"(, "context_parallel": 3)", "",
       "today.json: /pipeline/context_parallel: 3 GPUs need the sequence of 4096 tokens (/model/seq) in 6 equal "
       "chunks (2 per GPU, causal)"},
      {R"(, "attention": "unfused")", "", R"(, "context_parallel": 2)", "",
       "today.json: /pipeline/context_parallel: context parallelism runs through a fused attention kernel"},
      {"", "", R"(, "context_parallel": 32)", "", "today.json: /pipeline/context_parallel: 2 stages x 32 "
                                                 "context-parallel GPUs but only 32 devices (/cluster/devices)"},
      {"", "", R"(, "context_parallel": 2)", "",
       "today.json: /cluster/devices: 10 devices are not a whole number of pipelines of 2 stages x 2 "
       "context-parallel GPUs (data-parallel replicas)", 10},
      {"", "", R"(, "tensor_parallel": 2, "tp_comm_overlap": true)", "",
       "today.json: /pipeline/tp_comm_overlap: Transformer Engine overlaps the all-gathers and reduce-scatters of "
       "sequence parallelism: it needs sequence_parallel"},
      {R"(, "dtype": "fp8")", "", "", R"(, "device": "A100-80GB")",
       "today.json: /model/dtype: fp8 needs FP8 tensor cores (Hopper and later); device 0 (A100-80GB) has none"},
      {"", R"(, "fp8_params": true)", "", "", "today.json: /training/fp8_params: FP8 weights need FP8 training"},
      {"", R"(, "gradient_dtype": "fp16")", "", "",
       "today.json: /training/gradient_dtype: fp16 gradients of bf16 weights: expected fp32 or the weights' own "
       "precision (bf16)"},
      {R"(, "dtype": "fp8")", R"(, "gradient_dtype": "fp16")", "", "",
       "today.json: /training/gradient_dtype: fp16 gradients of fp8 weights: expected fp32 or the weights' own "
       "precision (bf16)"},
      {R"(, "dtype": "fp32")", R"(, "gradient_dtype": "bf16")", "", "",
       "today.json: /training/gradient_dtype: bf16 gradients of fp32 weights: expected fp32 or the weights' own "
       "precision (fp32)"},
      {"", R"(, "gradient_dtype": "fp8")", "", "",
       "today.json: /training/gradient_dtype: 'fp8' is not one of fp32, fp16, bf16"},
      {"", R"(, "data_parallel_sharding": "zero3")", "", "",
       "today.json: /training/data_parallel_sharding: 'zero3' is not one of none, optimizer, full"},
      {"", "", "", R"(, "placement": "pp-dp")", "today.json: /cluster/placement: 'pp-dp' is not one of tp-cp-pp-dp, "
                                                "tp-cp-dp-pp"},
      {"", "", "", R"(, "inter_node_link": "ethernet")", "today.json: /cluster/inter_node_link: unknown link "
                                                         "'ethernet'"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.message);
    auto c = Load(k.model, k.training, k.pipeline, k.cluster, k.devices);
    ASSERT_FALSE(c);
    EXPECT_NE(c.error().message.find(k.message), std::string::npos) << c.error().message;
  }
}

}  // namespace
}  // namespace twinpipe::cost
