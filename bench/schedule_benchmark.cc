// Speed of the schedule IR: build, insert comm and verify a 1F1B schedule.
// Target (issue 2): K=128, M=1024 in under 50 ms on the 2-core CI machine.
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

}  // namespace

// Before main, as the twinpipe program does first thing.
[[maybe_unused]] static const bool kept_freed_memory = (twinpipe::cli::KeepFreedMemory(), true);

BENCHMARK_MAIN();
