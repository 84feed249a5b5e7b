// Search (`twinpipe search`): the grid (grid.h) bounded point by point
// (bounds.h), then simulated most promising first (evaluation.h) unless the
// fitting points found so far (front.h) already beat a point's bounds.
#include "search/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

#include <fmt/format.h>

#include "ir/builders.h"
#include "search/bounds.h"
#include "search/evaluation.h"
#include "search/front.h"
#include "search/grid.h"

namespace twinpipe::search {
namespace {

using Clock = std::chrono::steady_clock;

// Pass 1: every point's bounds (cheap: no comm, no simulation), visited by
// the model's costs (tensor, sequence and context parallelism, overlap,
// selective recompute), which change only between groups, so that each is
// generated once.
Result<std::vector<Bounds>> BoundEveryPoint(const std::vector<Candidate>& grid, LowerBounds& lower,
                                            const SearchOptions& o) {
  const auto total = static_cast<int64_t>(grid.size());
  std::vector<Bounds> bounds(grid.size());
  std::vector<size_t> visit(grid.size());
  std::iota(visit.begin(), visit.end(), size_t{0});
  std::stable_sort(visit.begin(), visit.end(),
                   [&](size_t a, size_t b) { return ModelOf(grid[a]) < ModelOf(grid[b]); });
  for (size_t k = 0; k < visit.size(); ++k) {
    if (o.progress && k % 256 == 0) o.progress(static_cast<int64_t>(k) / 2, total);
    const Bounds& b = bounds[visit[k]] = lower.Of(grid[visit[k]]);
    // The totals' shortcut drops only points the full bound drops.
    if (o.check_bounds && b.over_cap_whatever_the_cut && b.runs && !b.over_cap) {
      return FailRuntime(fmt::format("point {} is over the cap by its totals but not by its bounds", visit[k]));
    }
  }
  return bounds;
}

// Pass 2: the points that may run (`order`), the most promising first, so
// that the front that skips the rest forms early; a point is simulated
// unless a fitting one beats its bounds. Returns the fitting points;
// counts the bounded and the over-cap ones in `r`.
Result<std::vector<Candidate>> SimulateTheUnbeaten(const std::vector<Candidate>& grid, std::vector<Bounds>& bounds,
                                                   std::vector<size_t> order, Evaluator& evaluator,
                                                   LowerBounds& lower, const SearchOptions& o, SearchResult& r) {
  const auto total = static_cast<int64_t>(grid.size());
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bounds[a].most_throughput > bounds[b].most_throughput; });
  Front front;
  auto beaten = [&](const Bounds& b) { return front.Dominates(b.most_throughput, b.least_peak); };
  std::vector<Candidate> fits;
  for (size_t k = 0; k < order.size(); ++k) {
    if (o.progress && k % 64 == 0) {
      o.progress(total / 2 + static_cast<int64_t>(k) * (total - total / 2) / std::max<int64_t>(1, order.size()),
                 total);
    }
    const size_t i = order[k];
    if (!o.check_bounds && beaten(bounds[i])) {
      ++r.configs_bounded;
      continue;
    }
    // The finer bound on the peak, where a fitting point is fast enough for
    // it to matter (tests: always).
    const double enough = o.check_bounds ? std::numeric_limits<double>::infinity()
                                         : front.LeastPeakAtLeast(bounds[i].most_throughput);
    if (o.check_bounds || std::isfinite(enough)) {
      bounds[i].least_peak = std::max(bounds[i].least_peak, lower.Peak(grid[i], enough));
      if (!o.check_bounds && beaten(bounds[i])) {
        ++r.configs_bounded;
        continue;
      }
    }
    auto c = evaluator.Simulate(grid[i]);
    if (c && c->fits) front.Remember(c->throughput, c->peak_memory_bytes);
    // The throughput bound holds for points that fit (it counts on their
    // memory limiting how many micro-batches overlap).
    if (o.check_bounds && c &&
        ((c->fits && c->throughput > bounds[i].most_throughput * (1 + 1e-12)) ||
         c->peak_memory_bytes < bounds[i].least_peak * (1 - 1e-12))) {
      return FailRuntime(fmt::format(
          "point {} (t={}{}{} c={} e={} K={} R={} M={} {} v={} recompute {} sharding {} {}) beats its bounds: {} "
          "samples/s (bound {}), peak {} (bound {})",
          i, c->tensor_parallel, c->sequence_parallel ? " sp" : "", c->tp_comm_overlap ? " overlap" : "",
          c->context_parallel, c->expert_parallel, c->stages, c->replicas, c->micro_batches, c->schedule, c->chunks,
          ir::RecomputeModeName(c->recompute), ir::NameOf(cost::kDataParallelShardingNames, c->sharding),
          cost::PartitionAlgorithmName(c->partition),
          c->throughput, bounds[i].most_throughput, c->peak_memory_bytes, bounds[i].least_peak));
    }
    if (!c || !c->fits) {
      ++r.over_cap;
      continue;
    }
    fits.push_back(std::move(*c));
  }
  return fits;
}

}  // namespace

Result<SearchResult> Search(const cost::Config& config, const SearchOptions& o) {
  const auto start = Clock::now();
  auto resized = ResizeCluster(config, o.devices);
  if (!resized) return tl::unexpected(resized.error());
  Evaluator evaluator(std::move(*resized), o.memory_cap_bytes, o.calibration);
  LowerBounds lower(evaluator, o.check_bounds);
  const int devices = evaluator.work().cluster.NumDevices();
  const int64_t global_batch = config.training.batch * config.Replicas();
  const std::vector<Candidate> grid = Grid(evaluator.work(), devices, global_batch, o);
  if (grid.empty()) return Fail(WhyNoConfiguration(evaluator.work(), devices, global_batch, o));
  const auto total = static_cast<int64_t>(grid.size());
  SearchResult r;
  r.configs_evaluated = total;
  auto bounds = BoundEveryPoint(grid, lower, o);
  if (!bounds) return tl::unexpected(bounds.error());
  std::vector<size_t> order;
  for (size_t i = 0; i < grid.size(); ++i) {
    if (!(*bounds)[i].runs || (*bounds)[i].over_cap) {
      ++r.over_cap;
    } else {
      order.push_back(i);
    }
  }
  auto fits = SimulateTheUnbeaten(grid, *bounds, std::move(order), evaluator, lower, o, r);
  if (!fits) return tl::unexpected(fits.error());
  r.configs_simulated = evaluator.simulated();
  if (o.progress) o.progress(total, total);
  r.pareto = ParetoFront(std::move(*fits));
  if (!r.pareto.empty()) r.best = o.objective == Objective::kThroughput ? r.pareto.front() : r.pareto.back();
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

Candidate CandidateOf(const cost::Config& config) {
  const cost::PipelineConfig& p = config.pipeline;
  return Candidate{.stages = p.stages,
                   .replicas = config.Replicas(),
                   .tensor_parallel = p.tensor_parallel,
                   .sequence_parallel = p.sequence_parallel,
                   .tp_comm_overlap = p.tp_comm_overlap,
                   .context_parallel = p.context_parallel,
                   .expert_parallel = p.expert_parallel,
                   .sharding = config.training.sharding,
                   .micro_batches = config.training.micro_batches,
                   .schedule = p.schedule,
                   .chunks = p.Chunks(),
                   .recompute = p.recompute,
                   .partition = p.partition,
                   .batch = config.training.batch};
}

nlohmann::ordered_json CandidateConfig(const nlohmann::ordered_json& original, const Candidate& c, int devices,
                                       double memory_cap) {
  nlohmann::ordered_json j = original;
  auto& pipeline = j["pipeline"];
  // The auto schedule or the memory cut found under the search's cap plans to it again.
  const bool capped = c.schedule == ir::kAutoSchedule || c.partition == cost::PartitionAlgorithm::kMemory;
  if (capped && memory_cap > 0) {
    pipeline["memory_cap"] = memory_cap;
  } else if (!capped) {
    pipeline.erase("memory_cap");
  }
  pipeline["stages"] = c.stages;
  if (c.tensor_parallel > 1 || pipeline.contains("tensor_parallel")) pipeline["tensor_parallel"] = c.tensor_parallel;
  if (c.sequence_parallel || pipeline.contains("sequence_parallel")) {
    pipeline["sequence_parallel"] = c.sequence_parallel;
  }
  if (c.tp_comm_overlap || pipeline.contains("tp_comm_overlap")) pipeline["tp_comm_overlap"] = c.tp_comm_overlap;
  if (c.context_parallel > 1 || pipeline.contains("context_parallel")) {
    pipeline["context_parallel"] = c.context_parallel;
  }
  if (c.expert_parallel > 1 || pipeline.contains("expert_parallel")) pipeline["expert_parallel"] = c.expert_parallel;
  if (c.sharding != cost::DataParallelSharding::kNone || j["training"].contains("data_parallel_sharding")) {
    j["training"]["data_parallel_sharding"] = std::string(ir::NameOf(cost::kDataParallelShardingNames, c.sharding));
  }
  pipeline["schedule"] = c.schedule;
  if (c.chunks != ir::DefaultChunks(c.schedule) || pipeline.contains("chunks")) pipeline["chunks"] = c.chunks;
  pipeline["recompute"] = std::string(ir::RecomputeModeName(c.recompute));
  pipeline["partition"] = std::string(cost::PartitionAlgorithmName(c.partition));
  pipeline.erase("first_layers");
  j["training"]["batch"] = c.batch;
  j["training"]["microbatches"] = c.micro_batches;
  if (j["cluster"].contains("device") && j["cluster"]["device"].is_string()) j["cluster"]["devices"] = devices;
  return j;
}

}  // namespace twinpipe::search
