// The transformer costed as its kernels: FLOPs against closed forms, the
// GEMM model's shape rules, the optimizer's bytes.
#include <array>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "cost_models/catalogue.h"
#include "cost_models/compute_model.h"
#include "cost_models/generators.h"

namespace twinpipe::cost {
namespace {

double PassFlops(const Layer& l, Kernel::Pass pass) {
  double f = 0;
  for (const Kernel& k : l.kernels) f += k.pass == pass ? k.Flops() : 0;
  return f;
}

TEST(KernelModel, EachBlocksKernelsAddUpToItsClosedFormFlops) {
  const Model m = GenerateTransformer({.layers = 2, .d_model = 1024, .ffn = 4096, .heads = 16, .seq = 512,
                                       .vocab = 50257, .dtype = Dtype::kFp16});
  for (const Layer& l : m.layers) {
    if (l.kind == "embedding") continue;  // memory-bound only
    EXPECT_DOUBLE_EQ(PassFlops(l, Kernel::Pass::kForward), l.fwd_flops) << l.name;
    EXPECT_DOUBLE_EQ(PassFlops(l, Kernel::Pass::kInput), l.bwd_input_flops) << l.name;
    EXPECT_DOUBLE_EQ(PassFlops(l, Kernel::Pass::kWeight), l.bwd_weight_flops) << l.name;
  }
  // QKV: 2 S d 3d; scores: h x 2 S S (d/h).
  const Layer& block = m.layers[1];
  for (const Kernel& k : block.kernels) {
    if (k.name == "qkv") {
      EXPECT_DOUBLE_EQ(k.Flops(), 2.0 * 512 * 1024 * 3072);
    } else if (k.name == "scores") {
      EXPECT_DOUBLE_EQ(k.Flops(), 16 * 2.0 * 512 * 512 * 64);
    } else if (k.name == "softmax") {
      EXPECT_DOUBLE_EQ(k.bytes, 2.0 * 16 * 512 * 512 * 2);
    }
  }
}

// Megatron-LM (Narayanan et al. 2021, eq. 3): an iteration with full
// recomputation costs 96 B s l h^2 (1 + s / 6h + V / 16 l h) FLOPs: the blocks
// run forward twice and backward once, the head (not recomputed) once each.
TEST(KernelModel, AStepWithFullRecomputeCostsMegatronsFlops) {
  for (int layers : {12, 20}) {
    for (double h : {1024.0, 2048.0}) {
      const double s = 1024, V = 50257, B = 8;
      const Model m = GenerateTransformer({.layers = layers, .d_model = int(h), .ffn = int(4 * h), .heads = 16,
                                           .seq = int(s), .vocab = int(V), .dtype = Dtype::kFp16});
      double total = 0;
      for (const Layer& l : m.layers) {
        if (l.kind == "embedding") continue;  // a gather: no GEMM FLOPs in Megatron's count
        for (ir::OpKind k : {ir::OpKind::kForward, ir::OpKind::kRecompute, ir::OpKind::kBackward}) {
          total += B * LayerOpFlops(l, k);
        }
      }
      const double l = layers;
      EXPECT_NEAR(total / (96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))), 1.0, 1e-12);
    }
  }
}

TEST(KernelModel, ALongerKAndAFullWaveApproachThePeak) {
  const Device& a100 = *FindDevice("A100-80GB");
  const Kernel base{.m = 128, .n = 128 * 4, .k = 1024};
  // A longer K loop amortises each tile's prologue and epilogue.
  Kernel short_k = base, long_k = base;
  long_k.k = 8 * base.k;
  EXPECT_LT(KernelTime(long_k, 1, a100, Dtype::kFp16, 0.8) / long_k.Flops(),
            KernelTime(short_k, 1, a100, Dtype::kFp16, 0.8) / short_k.Flops());
  // A full wave at the given efficiency and a long K approaches the peak.
  Kernel full{.m = 128.0 * 12, .n = 128.0 * 9, .k = 1 << 16};
  EXPECT_NEAR(full.Flops() / KernelTime(full, 1, a100, Dtype::kFp16, 0.8), 0.8 * 312e12, 0.8 * 312e12 * 1e-3);
}

// The tiled GEMM against closed forms at both ends: a GEMM of one wave takes
// one tile's time, one of whole waves its FLOPs at the rate (less each
// tile's prologue), a large one approaches the rate, and split-K lets a
// GEMM of one tile and a long K use the idle SMs.
TEST(KernelModel, TiledGemmAtBothEnds) {
  constexpr int kSms = 108;
  constexpr double kRate = 250e12, kBandwidth = 1.6e12, kPerSm = kRate / kSms;
  // 1024 x 1024 outputs, K 256: 64 tiles of 128 x 128 fill less than one
  // wave; 256 x 128 tiles (32) take twice as long, 128 x 64 (128 tiles, two
  // waves at 2/3 the rate) and 64 x 64 (256, three at half) 1.5 times.
  EXPECT_DOUBLE_EQ(TiledGemmSeconds(1024, 1024, 256, 1, kSms, kRate, kBandwidth),
                   2 * 128 * 128 * (256 + 16) / kPerSm);
  // Whole waves: 12 x 9 x 3 tiles of 128 x 128 are three waves.
  const double m = 128 * 12 * 3, n = 128 * 9, k = 4096;
  EXPECT_NEAR(TiledGemmSeconds(m, n, k, 1, kSms, kRate, kBandwidth), 2 * m * n * (k + 16) / kRate, 1e-15);
  // One more row of tiles costs a whole wave of 128 x 128 tiles, or less
  // with smaller tiles: between the two.
  const double staircase = TiledGemmSeconds(m + 1, n, k, 1, kSms, kRate, kBandwidth);
  EXPECT_GT(staircase, 2 * m * n * (k + 16) / kRate);
  EXPECT_LE(staircase, 4 * 2 * 128 * 128 * (k + 16) / kPerSm);
  // The asymptote: the rate, within a tile's prologue.
  const double big = 1 << 16;
  EXPECT_NEAR(2 * big * big * big / TiledGemmSeconds(big, big, big, 1, kSms, kRate, kBandwidth), kRate, kRate * 1e-3);
  // Split-K: one 128 x 128 tile over K = 16384 would take a whole tile's K
  // loop on one SM; sliced it is many times faster, never faster than all
  // SMs at the rate.
  const double one_tile = 2 * 128 * 128 * (16384 + 16) / kPerSm;
  const double split = TiledGemmSeconds(128, 128, 16384, 1, kSms, kRate, kBandwidth);
  EXPECT_LT(split, one_tile / 10);
  EXPECT_GT(split, 2 * 128 * 128 * 16384 / kRate);
  // Without a wave model: the FLOPs at the rate.
  EXPECT_DOUBLE_EQ(TiledGemmSeconds(1000, 1000, 1000, 2, 0, kRate, kBandwidth), 2 * 2e9 / kRate);
}

// More work never takes less time: over random shapes (and every shape
// around split-K's and the waves' thresholds), growing m, n, k or the batch
// by one never lowers the tiled GEMM's seconds. A brute-force check of the
// model's monotonicity, which a tile or slice chosen by threshold breaks.
TEST(KernelModel, TiledGemmNeverFasterForMoreWork) {
  std::mt19937 random(37);
  std::uniform_int_distribution<int> dim(1, 4096), small(1, 600);
  for (int trial = 0; trial < 20000; ++trial) {
    const bool tiny = trial % 2 == 0;
    const double m = tiny ? small(random) : dim(random), n = tiny ? small(random) : dim(random);
    const double k = dim(random) * (trial % 3 == 0 ? 8 : 1), batch = 1 + trial % 3;
    const double t = TiledGemmSeconds(m, n, k, batch, 108, 250e12, 1.6e12);
    ASSERT_LE(t, TiledGemmSeconds(m + 1, n, k, batch, 108, 250e12, 1.6e12)) << m << " " << n << " " << k;
    ASSERT_LE(t, TiledGemmSeconds(m, n + 1, k, batch, 108, 250e12, 1.6e12)) << m << " " << n << " " << k;
    ASSERT_LE(t, TiledGemmSeconds(m, n, k + 1, batch, 108, 250e12, 1.6e12)) << m << " " << n << " " << k;
    ASSERT_LE(t, TiledGemmSeconds(m, n, k, batch + 1, 108, 250e12, 1.6e12)) << m << " " << n << " " << k;
  }
}

// A weight-gradient GEMM adds into the fp32 gradient kept across the
// micro-batches (C = A B + C, fp32 C): on a GPU the same GEMM as a forward
// one plus the store of m n fp32 elements after its K loop, at the memory
// bandwidth; its roofline counts 8 bytes an output element (read and
// written). A GEMM of the other passes writes its output alone. In fp16
// training the kept gradient is fp16 (Megatron's default): 2 bytes stored,
// 4 in the roofline. Without a wave model (a CPU) only the roofline moves.
TEST(KernelModel, AWeightGradientAccumulatesIntoFp32) {
  // The store rule alone: a forward GEMM's own epilogue store (the H100's
  // epilogue_store) is off here; ATilesStoreFollowsItsMathWhereTheDeviceSaysSo
  // holds it, and that a weight gradient pays the fp32 store instead.
  Device h100 = *FindDevice("H100-SXM");
  h100.epilogue_store = 0;
  const double bandwidth = h100.memory_bandwidth * h100.bandwidth_efficiency;
  for (const auto& [m, n, k, batch] : std::vector<std::array<double, 4>>{
           {4096, 4096, 8192, 1}, {6144, 16384, 2048, 4}, {1024, 128256, 4096, 1}}) {
    SCOPED_TRACE(fmt::format("{} x {} x {}, batch {}", m, n, k, batch));
    Kernel forward{.pass = Kernel::Pass::kForward, .m = m, .n = n, .k = k, .batch = batch};
    Kernel wgrad = forward, dgrad = forward;
    wgrad.pass = Kernel::Pass::kWeight;
    dgrad.pass = Kernel::Pass::kInput;
    const double f = KernelTime(forward, 1, h100, Dtype::kBf16, 0.8);
    EXPECT_DOUBLE_EQ(KernelTime(dgrad, 1, h100, Dtype::kBf16, 0.8), f);
    EXPECT_NEAR(KernelTime(wgrad, 1, h100, Dtype::kBf16, 0.8), f + 4 * m * n * batch / bandwidth, 1e-15);
    // FP8 operands: the same fp32 store.
    wgrad.fp8 = forward.fp8 = true;
    EXPECT_NEAR(KernelTime(wgrad, 1, h100, Dtype::kFp8, 0.8),
                KernelTime(forward, 1, h100, Dtype::kFp8, 0.8) + 4 * m * n * batch / bandwidth, 1e-15);
    // fp16 training: an fp16 gradient, half the store.
    wgrad.fp8 = forward.fp8 = false;
    EXPECT_NEAR(KernelTime(wgrad, 1, h100, Dtype::kFp16, 0.8),
                KernelTime(forward, 1, h100, Dtype::kFp16, 0.8) + 2 * m * n * batch / bandwidth, 1e-15);
  }
  // Memory-bound (K of 8 tokens): the roofline of reading both operands and
  // reading and writing the fp32 gradient.
  Kernel thin{.pass = Kernel::Pass::kWeight, .m = 8192, .n = 8192, .k = 8};
  EXPECT_NEAR(KernelTime(thin, 1, h100, Dtype::kBf16, 0.8), (2.0 * (8192 * 8 * 2) + 8.0 * 8192 * 8192) / bandwidth,
              1e-12);
  EXPECT_NEAR(KernelTime(thin, 1, h100, Dtype::kFp16, 0.8), (2.0 * (8192 * 8 * 2) + 4.0 * 8192 * 8192) / bandwidth,
              1e-12);
  // A CPU has no wave model: only its roofline knows the fp32 gradient.
  Device cpu = h100;
  cpu.sm_count = 0;
  const double cpu_bandwidth = cpu.memory_bandwidth * cpu.bandwidth_efficiency;
  EXPECT_DOUBLE_EQ(KernelTime(thin, 1, cpu, Dtype::kBf16, 0.8), (2.0 * (8192 * 8 * 2) + 8.0 * 8192 * 8192) / cpu_bandwidth);
  Kernel square{.pass = Kernel::Pass::kWeight, .m = 4096, .n = 4096, .k = 4096};
  EXPECT_DOUBLE_EQ(KernelTime(square, 1, cpu, Dtype::kBf16, 0.8), square.Flops() / (0.8 * cpu.half_flops));
}

// A large FP8 GEMM reaches gemm_efficiency x fp8_gemm_ratio of the FP8 peak
// (on the H100 0.928 of its BF16 fraction, 0.742 sustained: 0.689), so FP8
// is less than twice BF16.
TEST(KernelModel, Fp8GemmsReachTheirOwnFraction) {
  const Device& h100 = *FindDevice("H100-SXM");
  // K long enough that the tiles' epilogues are under 0.3% of their math.
  const Kernel k{.m = 16384, .n = 16384, .k = 131072, .fp8 = true};
  const double bf16 = KernelTime(k, 1, h100, Dtype::kBf16, h100.gemm_efficiency);
  const double fp8 = KernelTime(k, 1, h100, Dtype::kFp8, h100.gemm_efficiency);
  EXPECT_NEAR(bf16 / fp8, 1979.0 / 989.5 * h100.fp8_gemm_ratio, 0.01);
  EXPECT_NEAR(k.Flops() / fp8, 1979e12 * 0.742 * 0.928, 1979e12 * 0.01);
}

// A tile's epilogue writes its outputs after its K loop at its SM's share
// of the bandwidth: on 4 SMs a 512 x 256 output is one wave of four 256 x
// 128 (or 128 x 256) tiles, so the store adds 256 x 128 x bytes x 4 /
// bandwidth once. On a GPU: the Hopper profiles pay it (epilogue_store 1,
// their kernel tables), others not; never a weight gradient's own output
// (its fp32 store into the kept gradient replaces it), never a flash
// attention's scores (they stay on the SM).
TEST(KernelModel, ATilesStoreFollowsItsMathWhereTheDeviceSaysSo) {
  const double rate = 4e12, bandwidth = 1e12;
  const double bare = TiledGemmSeconds(512, 256, 4096, 1, 4, rate, bandwidth);
  EXPECT_DOUBLE_EQ(bare, 2 * 256 * 128 * 4 * (4096 + 16) / rate);
  EXPECT_NEAR(TiledGemmSeconds(512, 256, 4096, 1, 4, rate, bandwidth, 2, 2) - bare, 256 * 128 * 2 * 4 / bandwidth,
              1e-15);
  EXPECT_NEAR(TiledGemmSeconds(512, 256, 4096, 1, 4, rate, bandwidth, 2, 0.5) - bare,
              256 * 128 * 0.5 * 4 / bandwidth, 1e-15);

  const Device& h100 = *FindDevice("H100-SXM");
  EXPECT_EQ(h100.epilogue_store, 1);
  EXPECT_EQ(FindDevice("H200")->epilogue_store, 1);
  EXPECT_EQ(FindDevice("A100-80GB")->epilogue_store, 0);
  Device hidden = h100;
  hidden.epilogue_store = 0;
  const double bandwidth_h100 = h100.memory_bandwidth * h100.bandwidth_efficiency;
  // 8192 x 8192 outputs of 128 x 256 tiles: 2,048 tiles in 16 waves of 132.
  Kernel gemm{.m = 8192, .n = 8192, .k = 4096};
  const double store = KernelTime(gemm, 1, h100, Dtype::kBf16, 0.7) - KernelTime(gemm, 1, hidden, Dtype::kBf16, 0.7);
  EXPECT_NEAR(store, std::ceil(2048.0 / 132) * 128 * 256 * 2 * 132 / bandwidth_h100, store * 1e-9);
  gemm.pass = Kernel::Pass::kWeight;
  EXPECT_DOUBLE_EQ(KernelTime(gemm, 1, h100, Dtype::kBf16, 0.7), KernelTime(gemm, 1, hidden, Dtype::kBf16, 0.7));
  Kernel flash{.m = 4096, .n = 4096, .k = 128, .batch = 32, .scaled = Kernel::Scaled::kBatch, .output_on_chip = true};
  EXPECT_DOUBLE_EQ(KernelTime(flash, 1, h100, Dtype::kBf16, 0.7), KernelTime(flash, 1, hidden, Dtype::kBf16, 0.7));
  const Device& a100 = *FindDevice("A100-80GB");
  Device a100_store = a100;
  a100_store.epilogue_store = 1;
  gemm.pass = Kernel::Pass::kForward;
  EXPECT_LT(KernelTime(gemm, 1, a100, Dtype::kFp16, 0.8), KernelTime(gemm, 1, a100_store, Dtype::kFp16, 0.8));
}

TEST(KernelModel, UnalignedHalfGemmsRunOnTheCudaCores) {
  const Device& a100 = *FindDevice("A100-80GB");
  const Kernel aligned{.m = 4096, .n = 50304, .k = 1024}, odd{.m = 4096, .n = 50257, .k = 1024};
  const double ratio = KernelTime(odd, 1, a100, Dtype::kFp16, 0.8) / KernelTime(aligned, 1, a100, Dtype::kFp16, 0.8);
  // 312 x 0.8 against 78 x kSimtEfficiency TFLOPS, less the 47 fewer columns.
  EXPECT_NEAR(ratio, 312.0 * 0.8 / (78 * kSimtEfficiency) * 50257 / 50304, 0.05);
}

// Aligned to 2 or 4 elements, a half-precision GEMM loads its operands 4 or
// 8 bytes at a time: twice and four times the odd shape's rate, never more
// than the tensor cores' peak. The vocabulary halves of vTrain's runs on 2,
// 4 and 8 GPUs (25128, 12564 and 6282 columns) are aligned to 8, 4 and 2.
TEST(KernelModel, HalfGemmsLoseRateWithTheirAlignment) {
  const Device& a100 = *FindDevice("A100-80GB");
  auto rate = [&](double n) {
    const Kernel k{.m = 4096, .n = n, .k = 1024};
    return k.Flops() / KernelTime(k, 1, a100, Dtype::kFp16, 1);
  };
  // Each against an aligned shape with as many 128-wide tiles.
  const double peak = a100.PeakFlops(Dtype::kFp16), simt = a100.simt_half_flops;
  // An odd shape runs on the CUDA cores at kSimtEfficiency of their rate;
  // one aligned to 2 or 4 on the tensor cores, at the GEMM efficiency (1
  // here), bound by its loads. (Within the few columns' share of a tile
  // that the aligned shape has more.)
  EXPECT_NEAR(rate(6283) / rate(6288), kSimtEfficiency * simt / peak, 1e-3);
  EXPECT_NEAR(rate(6282) / rate(6288), 2 * simt / peak, 1e-3);
  EXPECT_NEAR(rate(12564) / rate(12568), std::min(4 * simt, peak) / peak, 1e-3);
  // TF32 keeps its single rule: multiples of 4 on the tensor cores, else fp32.
  const Kernel tf{.m = 4096, .n = 12566, .k = 1024};
  EXPECT_NEAR(tf.Flops() / KernelTime(tf, 1, a100, Dtype::kTf32, 1), kSimtEfficiency * a100.fp32_flops,
              a100.fp32_flops * 0.05);
}

TEST(KernelModel, MemoryBoundKernelsAndTheHostFloor) {
  Device d = *FindDevice("A100-80GB");
  const Kernel copy{.gemm = false, .bytes = 1e9};
  EXPECT_DOUBLE_EQ(KernelTime(copy, 2, d, Dtype::kFp16, 0.8), 2e9 / (d.memory_bandwidth * d.bandwidth_efficiency));
  // A tiny layer costs its kernels' issue time on the host: per launch, the
  // CUDA launch and the framework ops that issue it (eager code's
  // kOpsPerKernel; one for a kernel a fused op issues from its C++).
  Kernel fused_copy{.gemm = false, .bytes = 8};
  fused_copy.framework_ops = 1;
  fused_copy.launches = 2;
  const Layer tiny{.kernels = {Kernel{.gemm = false, .bytes = 8}, fused_copy}};
  d.launch_overhead_s = 1e-5;
  d.kernel_launch_s = 3e-6;
  EXPECT_DOUBLE_EQ(LayerOpTime(tiny, ir::OpKind::kForward, d, Dtype::kFp16, 0.8, 1),
                   (3e-6 + kOpsPerKernel * 1e-5) + 2 * (3e-6 + 1e-5));
  d.kernel_launch_s = 0;
  EXPECT_DOUBLE_EQ(LayerOpTime(tiny, ir::OpKind::kForward, d, Dtype::kFp16, 0.8, 1), (kOpsPerKernel + 2) * 1e-5);
  // A layer costed without kernels is one framework op and its launch.
  d.kernel_launch_s = 3e-6;
  const Layer bare{.fwd_flops = 1, .params = 1};
  EXPECT_NEAR(LayerOpTime(bare, ir::OpKind::kForward, d, Dtype::kFp16, 0.8, 1), 1.3e-5, 1e-9);
  // The head is not re-run by a recompute.
  const Model m = GenerateTransformer({.layers = 1});
  EXPECT_EQ(LayerOpTime(m.layers.back(), ir::OpKind::kRecompute, d, Dtype::kFp16, 0.8, 4), 0);
  EXPECT_GT(LayerOpTime(m.layers[1], ir::OpKind::kRecompute, d, Dtype::kFp16, 0.8, 4), 0);
  EXPECT_EQ(RematerializedEnd(m, 0, 2), 2);
}

// Megatron's FusedScaleMaskSoftmax.is_kernel_available, transcribed with the
// CUDA extension's get_batch_per_block (scaled_masked_softmax.h): the fused
// kernel takes b x np score matrices of sq x sk in half precision when the
// shape passes these tests; else PyTorch's softmax runs.
bool MegatronFuses(int b, int np, int sq, int sk, bool half, bool causal) {
  const int attn_batches = b * np;
  if (!(half && 16 < sk && sk <= 4096 && sq % 4 == 0 && sk % 4 == 0 && attn_batches % 4 == 0)) return false;
  int log2_elements = 0;
  while ((1 << log2_elements) < sk) ++log2_elements;
  const int next_power_of_two = 1 << log2_elements;
  const int warp_size = next_power_of_two < 32 ? next_power_of_two : 32;
  const int batches_per_warp = next_power_of_two <= 128 ? 2 : 1;
  const int batches_per_block = (128 / warp_size) * batches_per_warp;
  return causal ? attn_batches % batches_per_block == 0 : sq % batches_per_block == 0;
}

// Forward and backward bytes of the softmax kernels that run for a micro-
// batch of b, and how many kernels.
struct SoftmaxRun {
  double fwd_bytes = 0, bwd_bytes = 0;
  int fwd_kernels = 0;
};
SoftmaxRun SoftmaxKernels(const Layer& block, int b) {
  SoftmaxRun r;
  for (const Kernel& k : block.kernels) {
    if (k.name.rfind("softmax", 0) != 0 || !RunsFor(k, b)) continue;
    if (k.pass == Kernel::Pass::kForward) {
      r.fwd_bytes += k.bytes;
      ++r.fwd_kernels;
    } else {
      r.bwd_bytes += k.bytes;
    }
  }
  return r;
}

// Where Megatron's fused kernel takes the scores, one kernel reads and
// writes them (2 bytes each way, 3 in backward); elsewhere PyTorch's path
// runs five kernels in fp32 (cast, scale, mask, softmax, cast back: 36
// bytes a score in half precision, 24 in fp32 without the casts) and their
// autograd backward (40, 28). vTrain's runs on 8 GPUs (16 heads, 2 a GPU)
// with micro-batch 1 take PyTorch's path.
TEST(KernelModel, MegatronsSoftmaxFallsBackToPyTorchWhereItsKernelCannotTakeTheShape) {
  int fused = 0, unfused = 0;
  for (Dtype dtype : {Dtype::kFp16, Dtype::kFp32}) {
    for (bool causal : {true, false}) {
      for (int S : {16, 20, 32, 60, 64, 128, 256, 1024, 2048, 4096, 8192}) {
        for (int t : {1, 2, 4, 8}) {
          const Layer block = GenerateTransformer({.layers = 1, .d_model = 1024, .ffn = 4096, .heads = 16, .seq = S,
                                                   .vocab = 64, .causal = causal, .dtype = dtype, .tensor_parallel = t})
                                  .layers[1];
          const double A = 16.0 / t * S * S, e = DtypeBytes(dtype);
          for (int b = 1; b <= 8; ++b) {
            SCOPED_TRACE(fmt::format("dtype={} causal={} S={} t={} b={}", e, causal, S, t, b));
            const SoftmaxRun r = SoftmaxKernels(block, b);
            if (MegatronFuses(b, 16 / t, S, S, e == 2, causal)) {
              ++fused;
              EXPECT_EQ(r.fwd_kernels, 1);
              EXPECT_DOUBLE_EQ(r.fwd_bytes, 2 * A * e);
              EXPECT_DOUBLE_EQ(r.bwd_bytes, 3 * A * e);
            } else {
              ++unfused;
              EXPECT_EQ(r.fwd_kernels, e == 2 ? 5 : 3);
              EXPECT_DOUBLE_EQ(r.fwd_bytes, A * (e == 2 ? 36 : 24));
              EXPECT_DOUBLE_EQ(r.bwd_bytes, A * (e == 2 ? 40 : 28));
            }
          }
        }
      }
    }
  }
  EXPECT_GT(fused, 100);  // both paths are exercised
  EXPECT_GT(unfused, 100);
  // On the A100 the fallback costs vTrain's 8-GPU block at micro-batch 1
  // more host time (10 more kernels in F and B) and more bytes.
  const Device& a100 = *FindDevice("A100-80GB");
  const Layer t8 = GenerateTransformer({.layers = 1, .d_model = 1024, .ffn = 4096, .heads = 16, .seq = 1024,
                                        .vocab = 64, .causal = true, .dtype = Dtype::kFp16, .tensor_parallel = 8})
                       .layers[1];
  Device host_bound = a100;
  host_bound.launch_overhead_s = 1e-3;
  host_bound.kernel_launch_s = 0;
  const auto launches = [&](ir::OpKind kind, double b) {
    return LayerOpTime(t8, kind, host_bound, Dtype::kFp16, 1, b) / (kOpsPerKernel * 1e-3);
  };
  EXPECT_NEAR(launches(ir::OpKind::kForward, 1) - launches(ir::OpKind::kForward, 2), 4, 1e-9);
  EXPECT_NEAR(launches(ir::OpKind::kBackward, 1) - launches(ir::OpKind::kBackward, 2), 4, 1e-9);
}

// Megatron's vocabulary-parallel cross-entropy (cross_entropy.py) in fp32
// over each GPU's V/t logits a token: forward, the cast from half (6 bytes a
// logit), max (4), subtract (8), exp (8), sum (4), normalise (8); backward,
// the scaling (8) and the cast back (6). Its other kernels touch the S tokens
// only and cost their issue: 19 forward (3 + 3 + 3 + 2 + 2 + 6), 10 backward.
TEST(KernelModel, TheCrossEntropyRunsMegatronsKernels) {
  for (int t : {1, 2, 4}) {
    const double S = 512, V = 32000;
    const Layer head = GenerateTransformer({.layers = 1, .d_model = 1024, .ffn = 4096, .heads = 16, .seq = int(S),
                                            .vocab = int(V), .dtype = Dtype::kFp16, .tensor_parallel = t})
                           .layers.back();
    double logit_fwd = 0, logit_bwd = 0, token_fwd = 0, token_bwd = 0;
    for (const Kernel& k : head.kernels) {
      if (k.gemm || k.collective != Kernel::Collective::kNone || k.name.rfind("ln_f", 0) == 0) continue;
      const bool fwd = k.pass == Kernel::Pass::kForward;
      if (k.name.rfind("loss.tokens", 0) == 0) {
        (fwd ? token_fwd : token_bwd) += k.launches;
        EXPECT_DOUBLE_EQ(k.bytes, 8 * S * k.launches) << k.name;
      } else {
        (fwd ? logit_fwd : logit_bwd) += k.bytes / (S * V / t);
      }
    }
    EXPECT_DOUBLE_EQ(logit_fwd, 6 + 4 + 8 + 8 + 4 + 8) << "t=" << t;
    EXPECT_DOUBLE_EQ(logit_bwd, 8 + 6) << "t=" << t;
    EXPECT_EQ(token_fwd, 19);
    EXPECT_EQ(token_bwd, 10);
  }
}

// Each framework op adds the device's kernel floor to the GPU time (the gap
// between kernels, their ramp and tail): its framework ops per modelled
// kernel (kOpsPerKernel for eager code), times its launches; a collective's
// measured cost has it already.
TEST(KernelModel, TheKernelFloorAddsGpuTimePerFrameworkOp) {
  Device d = *FindDevice("A100-80GB");
  const Link nvlink = *FindLink("nvlink3");
  Kernel tokens{.gemm = false, .bytes = 1e9};
  tokens.launches = 3;
  Kernel fused_copy{.gemm = false, .bytes = 1e9};
  fused_copy.framework_ops = 1;
  const Kernel copy{.gemm = false, .bytes = 1e9};
  const Kernel reduce{.gemm = false, .collective = Kernel::Collective::kAllReduce, .group = 2, .bytes = 1e6};
  const Layer layer{.kernels = {copy, tokens, reduce, fused_copy}};
  d.kernel_floor_s = 0;
  const double base = LayerOpTime(layer, ir::OpKind::kForward, d, Dtype::kFp16, 0.8, 1, &nvlink);
  d.kernel_floor_s = 5e-6;
  EXPECT_NEAR(LayerOpTime(layer, ir::OpKind::kForward, d, Dtype::kFp16, 0.8, 1, &nvlink) - base,
              ((1 + 3) * kOpsPerKernel + 1) * 5e-6, 1e-15);
}

TEST(KernelModel, AdamInMixedPrecisionStreams44BytesPerParameter) {
  const Device& a100 = *FindDevice("A100-80GB");
  EXPECT_EQ(OptimizerStepBytes("adam", Dtype::kFp16), 44);
  EXPECT_EQ(OptimizerStepBytes("adam", Dtype::kFp32), 28);
  EXPECT_EQ(OptimizerStepBytes("sgd", Dtype::kFp32), 20);
  EXPECT_DOUBLE_EQ(OptimizerStepTime("adam", Dtype::kBf16, 1e9, a100),
                   a100.kernel_launch_s + a100.launch_overhead_s +
                       44e9 / (a100.memory_bandwidth * a100.bandwidth_efficiency));
}

}  // namespace
}  // namespace twinpipe::cost
