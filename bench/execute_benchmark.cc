// The CPU executor's speed:
//   TransformerStep      wall time of a warm training step (forward, backward,
//                        Adam) of a 4-block transformer (d_model 256, seq 128,
//                        4 heads, ffn 1024, vocab 1000), K stages, batch 8 in
//                        M micro-batches
//   FailureStopsTheRun   from the start of a run whose op fails (a 4-stage
//                        1F1B MLP, the failure at its 8th op) until every
//                        device has stopped and the run returns its error
//   ReceiveTimeout       how long after its timeout (0.05 s) a receive whose
//                        send never comes ends the run (counter overshoot_s)
//   AllReduceOverlap     of the kept step's all-reduce time, the share that
//                        overlaps its device's later backward ops (2 replicas
//                        of an interleaved 2-device MLP; counter overlapped)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "cli/process.h"
#include "execute/runtime.h"
#include "ir/schedule.h"
#include "partition/pipeline_plan.h"

namespace {

using namespace twinpipe;
using Clock = std::chrono::steady_clock;

cost::Config Mlp(int stages, int micro_batches, const std::string& schedule, int width, int replicas) {
  auto c = cost::LoadConfig(fmt::format(R"({{
    "model": {{"generator": "mlp", "layers": 8, "width": {}, "input": 12, "classes": 5, "norm": "layernorm",
               "residual": true}},
    "training": {{"batch": 16, "microbatches": {}, "optimizer": "sgd", "learning_rate": 0.01, "seed": 3}},
    "pipeline": {{"stages": {}, "schedule": "{}", "recompute": "none"}},
    "cluster": {{"device": "CPU", "devices": {}, "link": "inproc"}}}})",
                                        width, micro_batches, stages, schedule, stages * replicas),
                            "bench.json");
  if (!c) throw std::runtime_error(c.error().message);
  return *c;
}

cost::Plan PlanOf(const cost::Config& c) {
  auto plan = partition::PlanFromConfig(c);
  if (!plan) throw std::runtime_error(plan.error().message);
  return *plan;
}

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

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

void BM_FailureStopsTheRun(benchmark::State& state) {
  const cost::Config c = Mlp(4, 8, "1f1b", 16, 1);
  const cost::Plan plan = PlanOf(c);
  for (auto _ : state) {
    const auto start = Clock::now();
    auto r = execute::ExecuteCpu(c, plan, {.steps = 2, .timeout_s = 30, .fail_op = 7});
    state.SetIterationTime(Seconds(start));
    if (r) {
      state.SkipWithError("the injected fault did not fail the run");
      break;
    }
  }
}
BENCHMARK(BM_FailureStopsTheRun)->UseManualTime()->Iterations(10)->Unit(benchmark::kMillisecond);

void BM_ReceiveTimeout(benchmark::State& state) {
  constexpr double kTimeoutS = 0.05;
  const cost::Config c = Mlp(2, 1, "gpipe", 16, 1);
  cost::Plan plan = PlanOf(c);
  auto& program = plan.schedule.programs[0];
  program.erase(std::find_if(program.begin(), program.end(),
                             [](const ir::Op& op) { return op.kind == ir::OpKind::kSendF; }));
  ir::Renumber(plan.schedule);
  double overshoot = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    auto r = execute::ExecuteCpu(c, plan, {1, kTimeoutS});
    const double took = Seconds(start);
    state.SetIterationTime(took);
    overshoot = std::max(overshoot, took - kTimeoutS);
    if (r) {
      state.SkipWithError("a receive without its send did not fail the run");
      break;
    }
  }
  state.counters["overshoot_s"] = overshoot;  // the worst iteration's
}
BENCHMARK(BM_ReceiveTimeout)->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);

void BM_AllReduceOverlap(benchmark::State& state) {
  const cost::Config c = Mlp(2, 4, "interleaved", 64, 2);
  const cost::Plan plan = PlanOf(c);
  double overlapped = 0, all_reduce = 0;
  for (auto _ : state) {
    auto r = execute::ExecuteCpu(c, plan, {.steps = 3});
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      break;
    }
    state.SetIterationTime(r->step_time_s[execute::MedianStep(r->step_time_s)]);
    for (const traces::Event& a : r->trace.events) {
      if (a.kind != ir::OpKind::kAllReduce) continue;
      all_reduce += a.end_s - a.start_s;
      for (const traces::Event& e : r->trace.events) {
        const bool backward = e.kind == ir::OpKind::kBackward || e.kind == ir::OpKind::kBackwardWeight;
        if (!backward || e.device != a.device || e.id < a.id) continue;
        overlapped += std::max(0.0, std::min(e.end_s, a.end_s) - std::max(e.start_s, a.start_s));
      }
    }
  }
  state.counters["overlapped"] = all_reduce > 0 ? overlapped / all_reduce : 0.0;
}
BENCHMARK(BM_AllReduceOverlap)->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);

}  // namespace

// Before main, as the twinpipe program does first thing.
[[maybe_unused]] static const bool kept_freed_memory = (twinpipe::cli::KeepFreedMemory(), true);

BENCHMARK_MAIN();
