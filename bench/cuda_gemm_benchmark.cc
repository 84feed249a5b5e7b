// Achieved TFLOP/s of a transformer block (below), and of the CUDA backend's GEMM-heavy layer, Linear, forward
// (x W^T) and backward (dy W and dy^T x), in fp32, TF32 and BF16, against the
// device's dense peak for that precision from the catalogue (H100-SXM, or the
// device TWINPIPE_DEVICE names), on pseudo-random inputs in [-1, 1] (zeros
// would flatter the GEMMs: less switching, less power, higher clocks). Skips,
// saying why, without a GPU.
//
//   build/bench/cuda_gemm_benchmark --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "cost_models/catalogue.h"
#include "execute/cuda/check.h"
#include "execute/cuda/from_cpu.h"
#include "cost_models/config.h"
#include "execute/layers/attention.h"
#include "execute/layers/gelu.h"
#include "execute/layers/layernorm.h"
#include "execute/layers/linear.h"
#include "execute/layers/transformer_block.h"

namespace {

using namespace twinpipe::execute;

const char* kNames[] = {"fp32", "tf32", "bf16"};

double PeakTflops(int precision) {
  const char* name = std::getenv("TWINPIPE_DEVICE");
  const twinpipe::cost::Device* d = twinpipe::cost::FindDevice(name ? name : "H100-SXM");
  if (!d) return 0;
  return (precision == 0 ? d->fp32_flops : precision == 1 ? d->tf32_flops : d->half_flops) * 1e-12;
}

// t's elements, a fixed pseudo-random function of (seed, index) in [-1, 1]
// (splitmix64's mixer, top 24 bits), written from the host before timing.
void FillUniform(const twinpipe::execute::cuda::DeviceTensor& t, uint64_t seed, cudaStream_t stream) {
  std::vector<float> host(static_cast<size_t>(t.size()));
  for (size_t i = 0; i < host.size(); ++i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    host[i] = static_cast<float>(z >> 40) * (2.f / 16777216.f) - 1.f;
  }
  TP_CUDA(cudaMemcpyAsync(t.data(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
  TP_CUDA(cudaStreamSynchronize(stream));  // before `host` goes
}

// Times Forward then Backward of `layer` on a fresh stream with CUDA events,
// one iteration per benchmark iteration after one untimed warm-up (cuBLAS's
// first call of a shape, the allocator's pool), and reports TFLOP/s against
// the catalogue's peak for the precision. Skips without a GPU.
void TimeForwardBackward(benchmark::State& state, twinpipe::execute::Layer& cpu, int rows, int in, int out,
                         int precision, double flops) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    state.SkipWithError("no CUDA device: this benchmark needs a GPU");
    for (auto _ : state) {
    }
    return;
  }
  cudaStream_t stream;
  TP_CUDA(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  TP_CUDA(cudaEventCreate(&start));
  TP_CUDA(cudaEventCreate(&stop));
  {  // the tensors are freed on the stream, so before it is destroyed
    const cuda::Blas blas;  // with its 32 MiB workspace, as the backend's
    MemoryAccount account;
    const cuda::Context ctx{stream, &blas, &account, static_cast<cuda::Precision>(precision)};
    auto layer = cuda::FromCpu(cpu);
    if (!layer) throw std::runtime_error(layer.error().message);
    cuda::DeviceTensor x = ctx.Alloc(rows, in), dy = ctx.Alloc(rows, out);
    FillUniform(x, 1, stream);
    FillUniform(dy, 2, stream);
    {
      cuda::Saved saved;
      (*layer)->Forward(ctx, x, saved, Mode::kTrain);
      (*layer)->Backward(ctx, dy, saved);
      TP_CUDA(cudaStreamSynchronize(stream));
    }
    for (auto _ : state) {
      TP_CUDA(cudaEventRecord(start, stream));
      cuda::Saved saved;
      (*layer)->Forward(ctx, x, saved, Mode::kTrain);
      (*layer)->Backward(ctx, dy, saved);
      TP_CUDA(cudaEventRecord(stop, stream));
      TP_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      TP_CUDA(cudaEventElapsedTime(&ms, start, stop));
      state.SetIterationTime(ms * 1e-3);
    }
  }
  if (flops > 0) {
    state.counters["TFLOP/s"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["of_peak"] = benchmark::Counter(flops * 1e-12 / PeakTflops(precision),
                                                   benchmark::Counter::kIsIterationInvariantRate);
  }
  state.SetLabel(std::string(cpu.Name()) + " " + kNames[precision]);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
}

// Arguments: rows, in, out, precision (0 fp32, 1 TF32, 2 BF16).
void LinearForwardBackward(benchmark::State& state, bool bias) {
  const int rows = static_cast<int>(state.range(0)), in = static_cast<int>(state.range(1)),
            out = static_cast<int>(state.range(2)), precision = static_cast<int>(state.range(3));
  Linear cpu(1, in, out, bias);
  TimeForwardBackward(state, cpu, rows, in, out, precision, 3 * 2.0 * rows * in * out);  // forward, dx, dW
}

void BM_LinearForwardBackward(benchmark::State& state) { LinearForwardBackward(state, true); }
// A transformer block's GEMMs at d_model 1024, seq 512, batch 8 (4096 rows):
// the projections (1024 x 1024) and the MLP (1024 x 4096, 4096 x 1024).
BENCHMARK(BM_LinearForwardBackward)
    ->ArgsProduct({{4096}, {1024}, {1024, 4096}, {0, 1, 2}})
    ->Args({4096, 4096, 1024, 2})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
// A d_model-4096 block (Llama-3-8B-like, so without biases) over 8192 tokens,
// in TF32 and BF16: the attention's output projection (4096 -> 4096), QKV
// with grouped-query attention (4096 -> 6144: 32 query and 8 K/V heads of
// 128), fc1 (4096 -> 14336) and fc2 (14336 -> 4096).
void BM_LlamaLinearForwardBackward(benchmark::State& state) { LinearForwardBackward(state, false); }
BENCHMARK(BM_LlamaLinearForwardBackward)
    ->ArgsProduct({{8192}, {4096}, {4096, 6144, 14336}, {1, 2}})
    ->ArgsProduct({{8192}, {14336}, {4096}, {1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Issue 11's figure: a pre-LN transformer block (d_model 1024, ffn 4096, 16
// heads, seq 512) forward and backward over batch 8, with the cost model's
// FLOPs for the block (per sample, times 8) over the measured time, against
// the BF16 (or TF32, FP32) peak.
void BM_TransformerBlock(benchmark::State& state) {
  constexpr int kBatch = 8, kSeq = 512, kD = 1024, kFfn = 4096, kHeads = 16;
  auto config = twinpipe::cost::LoadConfig(R"({"model": {"generator": "transformer", "layers": 1, "d_model": 1024,
      "ffn": 4096, "heads": 16, "seq": 512, "vocab": 1000}, "training": {"batch": 8, "microbatches": 1},
      "pipeline": {"stages": 1}, "cluster": {"device": "H100-SXM", "devices": 1, "link": "nvlink4"}})", "bench.json");
  if (!config) throw std::runtime_error(config.error().message);
  const twinpipe::cost::Layer& block = config->model.layers.at(1);
  TransformerBlock cpu(1, kD, kFfn, kHeads, kSeq, false);
  TimeForwardBackward(state, cpu, kBatch * kSeq, kD, kD, static_cast<int>(state.range(0)),
                      (block.fwd_flops + block.bwd_input_flops + block.bwd_weight_flops) * kBatch);
}
BENCHMARK(BM_TransformerBlock)->Arg(2)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// The block's parts at the same shapes (4096 rows of 1024), forward and
// backward in BF16, so that a slow kernel shows by name: its time, and its
// GEMM FLOPs' rate where it has GEMMs.
void BM_BlockPart(benchmark::State& state) {
  constexpr int kRows = 8 * 512, kD = 1024, kFfn = 4096, kHeads = 16, kSeq = 512;
  switch (state.range(0)) {
    case 0: {
      LayerNorm cpu(kD);
      TimeForwardBackward(state, cpu, kRows, kD, kD, 2, 0);
      break;
    }
    case 1: {
      SelfAttention cpu(1, kD, kHeads, kSeq, true);
      // QKV and output projections plus the two score products, x3 for backward.
      TimeForwardBackward(state, cpu, kRows, kD, kD, 2,
                          3 * (2.0 * kRows * kD * 4 * kD + 2 * 2.0 * kRows * kSeq * kD));
      break;
    }
    case 2: {
      Gelu cpu;
      TimeForwardBackward(state, cpu, kRows, kFfn, kFfn, 2, 0);
      break;
    }
    case 3: {
      Linear cpu(1, kD, kFfn);
      TimeForwardBackward(state, cpu, kRows, kD, kFfn, 2, 3 * 2.0 * kRows * kD * kFfn);
      break;
    }
  }
}
BENCHMARK(BM_BlockPart)->DenseRange(0, 3)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
