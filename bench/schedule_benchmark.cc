// Speed of the schedule IR: build, insert comm and verify a 1F1B schedule.
// Target (issue 2): K=128, M=1024 in under 50 ms on the 2-core CI machine.
// Also the automatic schedule's builder, which `search` runs for every
// `auto` point it simulates.
#include <benchmark/benchmark.h>

#include "cli/process.h"
#include "ir/builders.h"
#include "ir/passes.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

namespace {

using namespace twinpipe::ir;

void BM_Build1F1BInsertCommVerify(benchmark::State& state) {
  const auto K = static_cast<int32_t>(state.range(0));
  const auto M = static_cast<int32_t>(state.range(1));
  int64_t ops = 0;
  for (auto _ : state) {
    Schedule s = Build1F1B(K, M);
    if (!InsertComm(s, CommBytes{std::vector<int64_t>(K - 1, 1 << 20), std::vector<int64_t>(K - 1, 1 << 20)})) {
      state.SkipWithError("InsertComm failed");
    }
    auto diagnostics = Verify(s);
    if (!diagnostics.empty()) state.SkipWithError("schedule does not verify");
    ops = s.NumOps();
    benchmark::DoNotOptimize(diagnostics);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(ops) * state.iterations(),
                                                   benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Build1F1BInsertCommVerify)->Args({8, 32})->Args({128, 1024})->Unit(benchmark::kMillisecond);

void BM_VerifyOnly(benchmark::State& state) {
  Schedule s = Build1F1B(128, 1024);
  (void)InsertComm(s, {});
  for (auto _ : state) benchmark::DoNotOptimize(Verify(s));
}
BENCHMARK(BM_VerifyOnly)->Unit(benchmark::kMillisecond);

void BM_TextRoundTrip(benchmark::State& state) {
  Schedule s = Build1F1B(128, 1024);
  (void)InsertComm(s, {});
  for (auto _ : state) benchmark::DoNotOptimize(ParseText(PrintText(s), "bench"));
}
BENCHMARK(BM_TextRoundTrip)->Unit(benchmark::kMillisecond);

// The automatic schedule (all its variants) for a pipeline shaped like the
// 175B search's deepest one: K stages alike but the first (embedding) and
// the last (head and loss), transfers a tenth of a forward, boundaries a
// tenth of an activation, memory for K micro-batches in flight on every
// stage with their buffers.
void BM_BuildAuto(benchmark::State& state) {
  const auto K = static_cast<int32_t>(state.range(0));
  const auto M = static_cast<int32_t>(state.range(1));
  AutoProblem p;
  p.stages = K, p.micro_batches = M;
  for (int32_t st = 0; st < K; ++st) {
    const double scale = st == 0 ? 1.2 : st == K - 1 ? 1.5 : 1.0;
    p.forward_s.push_back(scale), p.input_s.push_back(scale), p.weight_s.push_back(scale * 0.9);
    p.comm_s.push_back(0.1);
    p.activation_bytes.push_back(1), p.kept_bytes.push_back(1), p.pending_bytes.push_back(0.4);
    p.boundary_bytes.push_back(0.1);
    p.limit_bytes.push_back(1.2 * K);
  }
  int64_t ops = 0;
  for (auto _ : state) {
    auto s = BuildAuto(p);
    if (!s) state.SkipWithError(s.error().message.c_str());
    ops = s->NumOps();
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(ops) * state.iterations(),
                                                   benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BuildAuto)->Args({8, 64})->Args({64, 4096})->Unit(benchmark::kMillisecond);

}  // namespace

// Before main, as the twinpipe program does first thing.
[[maybe_unused]] static const bool kept_freed_memory = (twinpipe::cli::KeepFreedMemory(), true);

BENCHMARK_MAIN();
