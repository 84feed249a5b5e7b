// CPU backend step time of a 4-block transformer (d_model 256, seq 128,
// 4 heads, ffn 1024, vocab 1000), one stage, batch 8 in M micro-batches.
// Reported: wall time of a warm training step (forward, backward, Adam).
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include "cli/process.h"
#include "execute/runtime.h"
#include "partition/pipeline_plan.h"

namespace {

using namespace twinpipe;

void BM_TransformerStep(benchmark::State& state) {
  const int stages = static_cast<int>(state.range(0)), micro_batches = static_cast<int>(state.range(1));
  auto c = cost::LoadConfig(fmt::format(R"({{
    "model": {{"generator": "transformer", "layers": 4, "d_model": 256, "ffn": 1024, "heads": 4, "seq": 128,
               "vocab": 1000}},
    "training": {{"batch": 8, "microbatches": {}, "optimizer": "adam"}},
    "pipeline": {{"stages": {}, "schedule": "1f1b", "recompute": "none"}},
    "cluster": {{"device": "CPU", "devices": {}, "link": "inproc"}}}})",
                                        micro_batches, stages, stages),
                            "bench.json");
  if (!c) throw std::runtime_error(c.error().message);
  auto plan = partition::PlanFromConfig(*c);
  if (!plan) throw std::runtime_error(plan.error().message);
  for (auto _ : state) {
    // Three steps, the last timed: the first pays for faulting in memory
    // and warming caches, as a long training job does once.
    auto r = execute::ExecuteCpu(*c, *plan, {.steps = 3});
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      break;
    }
    state.SetIterationTime(r->step_time_s.back());
  }
}
BENCHMARK(BM_TransformerStep)->Args({1, 1})->Args({1, 4})->Args({2, 4})->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace

// Before main, as the twinpipe program does first thing.
[[maybe_unused]] static const bool kept_freed_memory = (twinpipe::cli::KeepFreedMemory(), true);

BENCHMARK_MAIN();
