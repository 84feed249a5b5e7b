// Speed of the partitioners. Target (issue 3): minmax of L=100,000 layers into
// K=1,024 cells in under 1 s.
#include <benchmark/benchmark.h>

#include <random>

#include "cli/process.h"
#include "partition/partitioner.h"

namespace {

using namespace twinpipe::partition;

PartitionProblem Random(int layers, int cells, bool comm) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0.1, 10.0);
  std::vector<double> costs(layers);
  for (double& c : costs) c = u(rng);
  PartitionProblem p = UniformProblem(costs, cells);
  if (comm) {
    for (double& c : p.cut_costs[0]) c = u(rng) / 10;
  }
  return p;
}

void BM_MinMax(benchmark::State& state) {
  const PartitionProblem p = Random(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                                    state.range(2) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(MinMax(p));
}
BENCHMARK(BM_MinMax)->Args({100000, 1024, 0})->Args({100000, 1024, 1})->Unit(benchmark::kMillisecond);

void BM_MinVariance(benchmark::State& state) {
  const PartitionProblem p = Random(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), false);
  for (auto _ : state) benchmark::DoNotOptimize(MinVariance(p));
}
BENCHMARK(BM_MinVariance)->Args({1000, 16})->Unit(benchmark::kMillisecond);

}  // namespace

// Before main, as the twinpipe program does first thing.
[[maybe_unused]] static const bool kept_freed_memory = (twinpipe::cli::KeepFreedMemory(), true);

BENCHMARK_MAIN();
