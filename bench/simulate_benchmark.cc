// Speed of the simulator: simulated ops per second for 1F1B with comm.
// Target (issue 4): at least 10 million ops/s on one core, at most 128 bytes
// of memory per op (the simulator's own state, beyond the schedule).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include "ir/builders.h"
#include "ir/passes.h"
#include "simulate/engine.h"

namespace {

using namespace twinpipe;

// Bytes the allocator holds, to measure the simulator's footprint.
size_t HeldBytes() { return mallinfo2().uordblks; }

void BM_Simulate1F1B(benchmark::State& state) {
  const auto K = static_cast<int32_t>(state.range(0));
  const auto M = static_cast<int32_t>(state.range(1));
  ir::Schedule s = ir::Build1F1B(K, M);
  const std::vector<int64_t> bytes(K - 1, 1 << 20);
  (void)ir::InsertComm(s, {bytes, bytes});
  simulate::SimCosts c = simulate::UniformCosts(s, 1e-3, 2e-3);
  c.link = cost::Link{.name = "nvlink", .latency_s = 3e-6, .bandwidth = 450e9};
  double bytes_per_op = 0;
  for (auto _ : state) {
    const size_t before = HeldBytes();
    auto r = simulate::Simulate(s, c);
    bytes_per_op = static_cast<double>(HeldBytes() - before) / static_cast<double>(s.NumOps());
    benchmark::DoNotOptimize(r);
  }
  state.counters["ops"] = static_cast<double>(s.NumOps());
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(s.NumOps()) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["result_bytes_per_op"] = bytes_per_op;
}
BENCHMARK(BM_Simulate1F1B)->Args({8, 32})->Args({64, 512})->Args({512, 4096})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
