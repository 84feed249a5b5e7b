// Fixed work that uses no twinpipe code: how fast this machine's
// core and memory are while the other benchmarks run. The machine's speed
// varies by 3 to 4 times from day to day on unchanged code, so every bench
// recording keeps this figure beside its own (scripts/bench_table.py), and a
// later reader can tell a slow machine from slow code.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

// 2^25 dependent multiply-adds: a chain the core cannot overlap, so its time
// is the core's floating-point latency times the count, whatever its caches
// or memory (65 ms on the development machine, 2026-11-29).
void BM_ReferenceLoop(benchmark::State& state) {
  constexpr int64_t kSteps = int64_t{1} << 25;
  for (auto _ : state) {
    double x = 1.0 + 1e-9 * static_cast<double>(state.iterations());
    for (int64_t i = 0; i < kSteps; ++i) x = x * 0.999999999 + 1e-9;
    benchmark::DoNotOptimize(x);
  }
  state.counters["steps_per_s"] = benchmark::Counter(static_cast<double>(kSteps) * static_cast<double>(state.iterations()),
                                                     benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReferenceLoop)->Unit(benchmark::kMillisecond);

// 2^21 dependent loads, each at a random place of a 64 MiB table (one cycle
// through all its entries, built once): the memory's latency past the
// caches, which the large simulations and partitions feel and the loop above
// does not (0.36 s at 172 ns a load on the development machine, 2026-11-29).
void BM_ReferenceMemory(benchmark::State& state) {
  constexpr size_t kEntries = size_t{1} << 23;  // 8 bytes each: 64 MiB
  constexpr int64_t kLoads = int64_t{1} << 21;
  std::vector<uint64_t> order(kEntries);
  std::iota(order.begin(), order.end(), uint64_t{0});
  std::shuffle(order.begin() + 1, order.end(), std::mt19937_64(42));
  std::vector<uint64_t> next(kEntries);
  for (size_t i = 0; i < kEntries; ++i) next[order[i]] = order[(i + 1) % kEntries];
  uint64_t at = 0;
  for (auto _ : state) {
    for (int64_t i = 0; i < kLoads; ++i) at = next[at];
    benchmark::DoNotOptimize(at);
  }
}
BENCHMARK(BM_ReferenceMemory)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
