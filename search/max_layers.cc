// MaxLayers (`twinpipe search --max-layers`): per K and recompute mode, the
// deepest generator model whose simulated plan fits, found by galloping and
// bisecting on the layer count (the answer is monotone in it).
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ir/builders.h"
#include "search/evaluation.h"
#include "search/grid.h"
#include "search/search.h"

namespace twinpipe::search {
namespace {

constexpr int kMostLayers = 1 << 16;          // --max-layers searches no deeper
constexpr int kMemoryPartitionLayers = 2048;  // nor partitions deeper models by memory

}  // namespace

Result<std::vector<MaxLayersRow>> MaxLayers(const cost::Config& config, const SearchOptions& o) {
  if (config.generator.empty()) {
    return Fail(fmt::format("{}: /model: --max-layers needs a generator model (transformer, mlp or cnn), "
                            "not a list of layers", config.source));
  }
  auto resized = ResizeCluster(config, o.devices);
  if (!resized) return tl::unexpected(resized.error());
  Evaluator evaluator(std::move(*resized), o.memory_cap_bytes, o.calibration);
  cost::Config& work = evaluator.work();
  const int devices = work.cluster.NumDevices();
  const int min_layers = config.mlp ? 2 : 1;
  // Fills the row for `layers` and says whether it fits.
  auto fits = [&](int K, ir::RecomputeMode mode, int layers, MaxLayersRow& row) {
    cost::Regenerate(work, layers);
    if (static_cast<int>(work.model.layers.size()) < K) return false;
    // Everything but K (and so the replicas), the recompute mode and the cut as the config has it.
    Candidate c = CandidateOf(config);
    c.stages = K;
    c.replicas = devices / (K * config.GpusPerDevice());
    c.recompute = mode;
    if (static_cast<int64_t>(K) * c.chunks > static_cast<int64_t>(work.model.layers.size())) return false;
    if (!ir::CheckShape(c.schedule, K, c.micro_batches, c.chunks)) return false;
    // As search's grid: interleaved in Megatron-Core's default groups of K.
    if (c.schedule == "interleaved" && c.micro_batches % K != 0) return false;
    // The time-balanced cut first; the memory-aware one (quadratic in the
    // layers) where that overflows and the model is small enough.
    c.partition = cost::PartitionAlgorithm::kMinMax;
    evaluator.ForgetTheModel();
    auto e = evaluator.Simulate(c);
    if ((!e || !e->fits) && layers <= kMemoryPartitionLayers) {
      c.partition = cost::PartitionAlgorithm::kMemory;
      e = evaluator.Simulate(c);
    }
    if (!e || !e->fits) return false;
    row.max_layers = layers;
    row.peak_memory_bytes = e->peak_memory_bytes;
    return true;
  };
  // The answer is monotone in the layer count (a deeper model never fits
  // where a shallower one does not), and nearly linear in K: the answers of
  // the two previous K's predict the next one, and a gallop from the
  // prediction brackets the exact answer in a few probes.
  auto bisect = [&](int K, ir::RecomputeMode mode, int good, int bad, MaxLayersRow& row) {
    MaxLayersRow probe = row;
    while (bad - good > 1) {
      const int mid = good + (bad - good) / 2;
      if (fits(K, mode, mid, probe)) {
        good = mid;
        row = probe;
      } else {
        bad = mid;
      }
    }
  };
  std::vector<MaxLayersRow> rows;
  const int groups = devices / config.GpusPerDevice();  // the config's t and c hold; K x R groups
  std::map<ir::RecomputeMode, std::vector<std::pair<int, int>>> found;  // (K, max layers) so far, by mode
  for (int K = 1; K <= groups; ++K) {
    if (groups % K != 0) continue;
    for (auto mode : {ir::RecomputeMode::kNone, ir::RecomputeMode::kFull}) {
      MaxLayersRow row{K, mode, 0, 0};
      const auto& known = found[mode];
      const int least = std::max(min_layers, K);
      if (known.size() >= 2) {
        const auto [k1, a1] = known[known.size() - 2];
        const auto [k2, a2] = known.back();
        const double slope = static_cast<double>(a2 - a1) / (k2 - k1);
        const int guess = std::clamp(static_cast<int>(std::lround(a2 + slope * (K - k2))), least, kMostLayers - 1);
        if (fits(K, mode, guess, row)) {
          int good = guess, step = 1;
          MaxLayersRow probe = row;
          while (good + step < kMostLayers && fits(K, mode, good + step, probe)) {
            good += step;
            row = probe;
            step *= 2;
          }
          bisect(K, mode, good, std::min(good + step, kMostLayers), row);
        } else {
          int bad = guess, step = 1;
          while (bad - step >= least && !fits(K, mode, bad - step, row)) {
            bad -= step;
            step *= 2;
          }
          if (bad - step >= least) bisect(K, mode, bad - step, bad, row);
        }
      } else {
        int lo = min_layers;  // largest known to fit, once one does
        while (lo < kMostLayers && !fits(K, mode, lo, row)) {
          if (static_cast<int>(work.model.layers.size()) >= K) break;  // the smallest useful depth does not fit
          ++lo;
        }
        if (row.max_layers > 0) {
          int hi = lo;  // grow until it does not fit, then bisect
          while (hi < kMostLayers && fits(K, mode, hi * 2, row)) hi *= 2;
          bisect(K, mode, hi, std::min(hi * 2, kMostLayers), row);
        }
      }
      if (row.max_layers > 0) found[mode].emplace_back(K, row.max_layers);
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace twinpipe::search
