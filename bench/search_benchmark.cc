// Speed of `twinpipe search`: configurations of a 48-layer transformer
// simulated per second on one core. Target (issue 8): at least 10,000
// (Calculon, an analytical model in Python, manages about 400).
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include "cli/process.h"
#include "search/search.h"

namespace {

using namespace twinpipe;

cost::Config Transformer48(int devices, int batch) {
  auto c = cost::LoadConfig(fmt::format(R"({{
    "model": {{"generator": "transformer", "layers": 48, "d_model": 1600, "heads": 25, "seq": 1024, "vocab": 50257,
               "dtype": "bf16"}},
    "training": {{"batch": {}, "microbatches": 8, "optimizer": "adam", "bytes_per_param": 16}},
    "pipeline": {{"stages": {}}},
    "cluster": {{"device": "H100-SXM", "devices": {}, "link": "nvlink4"}}}})",
                                        batch, devices, devices),
                            "gpt2-xl.json");
  if (!c) throw std::runtime_error(c.error().message);
  return *c;
}

// Runs the search once per iteration, counting its grid, what it simulated
// and skipped, and the rate; labels the best plan (t, e, c, K, R, M,
// schedule, v, recompute, sharding).
void RunSearch(benchmark::State& state, const cost::Config& c, const search::SearchOptions& o = {}) {
  int64_t configs = 0;
  for (auto _ : state) {
    auto r = search::Search(c, o);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    configs += r->configs_evaluated;
    state.counters["grid"] = static_cast<double>(r->configs_evaluated);
    state.counters["simulated"] = static_cast<double>(r->configs_simulated);
    state.counters["bounded"] = static_cast<double>(r->configs_bounded);
    state.counters["over_cap"] = static_cast<double>(r->over_cap);
    if (const auto& b = r->best) {
      state.counters["best_samples_per_s"] = b->throughput;
      state.SetLabel(fmt::format("best t={}{}{} e={} c={} K={} R={} M={} {} v={} {} {}", b->tensor_parallel,
                                 b->sequence_parallel ? " sp" : "", b->tp_comm_overlap ? " overlap" : "",
                                 b->expert_parallel, b->context_parallel, b->stages, b->replicas, b->micro_batches,
                                 b->schedule, b->chunks, ir::RecomputeModeName(b->recompute),
                                 ir::NameOf(cost::kDataParallelShardingNames, b->sharding)));
    }
  }
  state.counters["configs_per_s"] = benchmark::Counter(static_cast<double>(configs), benchmark::Counter::kIsRate);
  state.SetItemsProcessed(configs);
}

// Arguments: devices, global mini-batch (one replica in the config, so the
// search keeps this batch whatever K it tries).
void BM_Search(benchmark::State& state) {
  const cost::Config c = Transformer48(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  RunSearch(state, c);
}
BENCHMARK(BM_Search)->Args({8, 64})->Args({16, 128})->Unit(benchmark::kMillisecond);

// 3-D (issue 18): a 175B GPT (Korthikanti et al.'s) on 1,024 A100s in nodes
// of 8, the search spanning tensor parallelism t in {1, 2, 4, 8} with and
// without sequence parallelism, selective recompute, stages, replicas,
// micro-batches and schedules. Target: 10,000 configurations per second.
void BM_Search175BOn1024(benchmark::State& state) {
  auto c = cost::LoadConfig(R"({
    "model": {"generator": "transformer", "layers": 96, "d_model": 12288, "heads": 96, "seq": 2048, "vocab": 51200,
              "dtype": "fp16", "causal": true},
    "training": {"batch": 512, "microbatches": 512, "optimizer": "adam", "bytes_per_param": 18},
    "pipeline": {"stages": 8, "schedule": "1f1b", "recompute": "selective", "tensor_parallel": 8,
                 "sequence_parallel": true},
    "cluster": {"device": "A100-80GB", "devices": 1024, "gpus_per_node": 8, "link": "nvlink3",
                "inter_node_link": "ib-hdr"}})",
                            "175b.json");
  if (!c) throw std::runtime_error(c.error().message);
  RunSearch(state, *c);
}
BENCHMARK(BM_Search175BOn1024)->Iterations(1)->Unit(benchmark::kSecond);

// Issue 36: Llama 3.1 405B (126 blocks, d_model 16384, FFN 53248, 128 heads,
// 8 K/V heads, 8,192 tokens, vocabulary 128,256; SwiGLU, RMSNorm, RoPE, no
// bias, fused causal attention) on 16,384 H100s in nodes of 8 on NDR
// InfiniBand, its global batch of 2,048 sequences (16M tokens), the search
// spanning t, c (up to 8), stages, replicas, interleave factors, micro-
// batches, schedules, recompute, sharding and tensor-parallel overlap.
// Argument: 0 bf16, 1 fp8 (FP8 weights). Target: 10,000 configurations per
// second on one core.
void BM_SearchLlama405BOn16384(benchmark::State& state) {
  const bool fp8 = state.range(0) == 1;
  auto c = cost::LoadConfig(fmt::format(R"({{
    "model": {{"generator": "transformer", "layers": 126, "d_model": 16384, "ffn": 53248, "heads": 128, "kv_heads": 8,
              "seq": 8192, "vocab": 128256, "dtype": "{}", "causal": true, "mlp": "swiglu", "norm": "rmsnorm",
              "position": "rope", "bias": false, "attention": "fused"}},
    "training": {{"batch": 16, "microbatches": 16, "optimizer": "adam", "bytes_per_param": 18{}}},
    "pipeline": {{"stages": 16, "schedule": "1f1b", "recompute": "none", "tensor_parallel": 8,
                 "sequence_parallel": true}},
    "cluster": {{"device": "H100-SXM", "devices": 16384, "gpus_per_node": 8, "link": "nvlink4",
                "inter_node_link": "ib-ndr"}}}})",
                                        fp8 ? "fp8" : "bf16", fp8 ? R"(, "fp8_params": true)" : ""),
                            "llama405b.json");
  if (!c) throw std::runtime_error(c.error().message);
  search::SearchOptions o;
  o.max_context_parallel = 8;
  o.min_context_tokens = 0;
  RunSearch(state, *c, o);
}
BENCHMARK(BM_SearchLlama405BOn16384)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kSecond);

// Issue 41: a Mixtral-8x7B-class mixture of experts (32 blocks, d_model
// 4096, 8 experts of FFN 14336, top-2, dropless, grouped GEMMs; GQA,
// SwiGLU, RMSNorm, RoPE) on 64 H100s in nodes of 8, a global batch of 256
// sequences of 4,096 tokens: the search spans the expert-parallel degree e
// beside t, stages, replicas, interleave, micro-batches, schedules,
// recompute and sharding (examples/mixtral_8x7b_h100.json). Target: seconds.
void BM_SearchMixtralOn64(benchmark::State& state) {
  auto c = cost::LoadConfig(R"({
    "model": {"generator": "transformer", "layers": 32, "d_model": 4096, "ffn": 14336, "heads": 32, "kv_heads": 8,
              "seq": 4096, "vocab": 32000, "dtype": "bf16", "causal": true, "mlp": "swiglu", "norm": "rmsnorm",
              "position": "rope", "bias": false, "tied_embeddings": false, "attention": "fused",
              "experts": 8, "top_k": 2, "moe_ffn": 14336, "capacity_factor": 0, "grouped_gemm": true},
    "training": {"batch": 16, "microbatches": 16, "optimizer": "adam", "bytes_per_param": 18},
    "pipeline": {"stages": 4, "schedule": "interleaved", "chunks": 4, "tensor_parallel": 1, "expert_parallel": 8},
    "cluster": {"device": "H100-SXM", "devices": 64, "gpus_per_node": 8, "link": "nvlink4",
                "inter_node_link": "ib-ndr"}})",
                            "mixtral.json");
  if (!c) throw std::runtime_error(c.error().message);
  RunSearch(state, *c);
}
BENCHMARK(BM_SearchMixtralOn64)->Iterations(1)->Unit(benchmark::kSecond);

// GPipe's Table 1 question (issue 19): the deepest Transformer-L (d_model
// 2048, ffn 8192, 32 heads, seq 1024, vocab 32000; batch 32, M = 32, 12 bytes
// per parameter) that fits 16 GiB TPUv3 cores, for every K dividing 128,
// with and without recompute. Target: under 1 s.
void BM_MaxLayersGpipeTable1(benchmark::State& state) {
  auto c = cost::LoadConfig(R"({
    "model": {"generator": "transformer", "layers": 8, "d_model": 2048, "ffn": 8192, "heads": 32, "seq": 1024,
              "vocab": 32000, "dtype": "bf16"},
    "training": {"batch": 32, "microbatches": 32, "bytes_per_param": 12},
    "pipeline": {"stages": 1, "schedule": "gpipe", "recompute": "full"},
    "cluster": {"device": "TPUv3", "devices": 128, "link": "tpu-ici"}})",
                            "table1.json");
  if (!c) throw std::runtime_error(c.error().message);
  for (auto _ : state) {
    auto rows = search::MaxLayers(*c, {});
    if (!rows) state.SkipWithError(rows.error().message.c_str());
    state.counters["K=128 full"] = rows->back().max_layers;
  }
}
BENCHMARK(BM_MaxLayersGpipeTable1)->Unit(benchmark::kMillisecond);

}  // namespace

// Before main, as the twinpipe program does first thing.
[[maybe_unused]] static const bool kept_freed_memory = (twinpipe::cli::KeepFreedMemory(), true);

BENCHMARK_MAIN();
