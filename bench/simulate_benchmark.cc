// Speed of the simulator: simulated ops per second for 1F1B with comm.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // the counting operators below pair malloc and free
// Target (issue 4): at least 10 million ops/s on one core, at most 128 bytes
// of memory per op (peak heap during Simulate, its result included, beyond
// the schedule itself).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "cli/process.h"
#include "ir/builders.h"
#include "ir/passes.h"
#include "simulate/engine.h"

namespace {

using namespace twinpipe;

// Heap bytes in use and their peak, counted by the operators below.
std::atomic<int64_t> g_in_use{0}, g_peak{0};

}  // namespace

void* operator new(size_t size) {
  void* p = std::malloc(size);
  if (!p) throw std::bad_alloc();
  const int64_t now = g_in_use += static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}
void operator delete(void* p) noexcept {
  if (!p) return;
  g_in_use -= static_cast<int64_t>(malloc_usable_size(p));
  std::free(p);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }
void* operator new(size_t size, std::align_val_t align) {
  void* p = std::aligned_alloc(static_cast<size_t>(align), (size + static_cast<size_t>(align) - 1) /
                                                                 static_cast<size_t>(align) * static_cast<size_t>(align));
  if (!p) throw std::bad_alloc();
  const int64_t now = g_in_use += static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}
void operator delete(void* p, std::align_val_t) noexcept { operator delete(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { operator delete(p); }

namespace {

void BM_Simulate1F1B(benchmark::State& state) {
  const auto K = static_cast<int32_t>(state.range(0));
  const auto M = static_cast<int32_t>(state.range(1));
  ir::Schedule s = ir::Build1F1B(K, M);
  const std::vector<int64_t> bytes(K - 1, 1 << 20);
  (void)ir::InsertComm(s, {bytes, bytes});
  simulate::PlanCosts c = cost::UniformCosts(s, 1e-3, 2e-3);
  c.link = cost::Link{.name = "nvlink", .latency_s = 3e-6, .bandwidth = 450e9};
  double peak_bytes_per_op = 0;
  for (auto _ : state) {
    const int64_t before = g_in_use.load();
    g_peak = before;
    auto r = simulate::Simulate(s, c);
    peak_bytes_per_op = static_cast<double>(g_peak.load() - before) / static_cast<double>(s.NumOps());
    benchmark::DoNotOptimize(r);
  }
  state.counters["ops"] = static_cast<double>(s.NumOps());
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(s.NumOps()) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["peak_bytes_per_op"] = peak_bytes_per_op;  // result included
}
BENCHMARK(BM_Simulate1F1B)->Args({8, 32})->Args({64, 512})->Args({512, 4096})->Unit(benchmark::kMillisecond);
// The largest case again, timing only calls after the first, whose heap is
// reused (as in `search`, which simulates many configs in one process); the
// first call's cost is mostly the kernel zeroing fresh pages.
BENCHMARK(BM_Simulate1F1B)->Name("BM_Simulate1F1B_warm")->Args({512, 4096})->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  twinpipe::cli::KeepFreedMemory();  // as the twinpipe program does: warm calls reuse faulted-in pages
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
