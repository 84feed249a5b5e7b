// Speed of `twinpipe search`: configurations of a 48-layer transformer
// simulated per second on one core. Target (issue 8): at least 10,000
// (Calculon, an analytical model in Python, manages about 400).
#include <benchmark/benchmark.h>

#include <fmt/format.h>

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

// Arguments: devices, global mini-batch (one replica in the config, so the
// search keeps this batch whatever K it tries).
void BM_Search(benchmark::State& state) {
  const cost::Config c = Transformer48(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  int64_t configs = 0;
  for (auto _ : state) {
    auto r = search::Search(c, {});
    if (!r) state.SkipWithError(r.error().message.c_str());
    configs += r->configs_evaluated;
    state.counters["grid"] = static_cast<double>(r->configs_evaluated);
    state.counters["simulated"] = static_cast<double>(r->configs_simulated);
    state.counters["bounded"] = static_cast<double>(r->configs_bounded);
  }
  state.SetItemsProcessed(configs);
}
BENCHMARK(BM_Search)->Args({8, 64})->Args({16, 128})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
