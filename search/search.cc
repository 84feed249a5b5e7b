#include "search/search.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <ranges>
#include <tuple>

#include <fmt/format.h>

#include "cost_models/memory_model.h"
#include "ir/builders.h"
#include "partition/pipeline_plan.h"
#include "simulate/costs.h"
#include "simulate/engine.h"

namespace twinpipe::search {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMostLayers = 1 << 16;             // --max-layers searches no deeper
constexpr int kMemoryPartitionLayers = 2048;     // nor partitions deeper models by memory

// The config on `devices` devices: a homogeneous cluster grows or shrinks;
// one listed device by device must keep its length.
Result<cost::Config> Resize(const cost::Config& c, int devices) {
  if (devices == 0 || devices == c.cluster.NumDevices()) return c;
  const auto& d = c.cluster.devices;
  const bool homogeneous = std::all_of(d.begin(), d.end(), [&](const cost::Device& x) { return x.name == d[0].name; });
  if (!homogeneous) {
    return Fail(fmt::format("{}: --devices {}: /cluster/device lists {} devices one by one; search them at that count",
                            c.source, devices, c.cluster.NumDevices()));
  }
  cost::Config resized = c;
  resized.cluster.devices.assign(devices, d[0]);
  return resized;
}

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 1; i <= n; ++i) {
    if (n % i == 0) out.push_back(i);
  }
  return out;
}

// What the search keeps from simulating a plan; shared by grid points whose
// plans coincide (partition algorithms that cut alike).
struct Outcome {
  double step_time_s = 0, bubble_fraction = 0;
  std::vector<double> peaks;  // per device
};

// The schedule-shape part of a grid point plus its cut: points with equal
// keys have the same plan, costs and so simulation.
using PlanKey = std::tuple<int, int, int, std::string, int, int, std::vector<int>>;

// Running state of one search: the memo of simulated plans and the fitting
// points so far, for the bound that skips simulations.
struct Searcher {
  cost::Config work;  // scratch: each grid point's settings written in
  double cap = 0;
  std::map<PlanKey, Outcome> memo;
  std::vector<std::pair<double, double>> front;  // (throughput, peak) of fitting points, no two dominating
  int64_t simulated = 0, bounded = 0;

  double Limit(int d) const {
    return std::min(cap > 0 ? cap : std::numeric_limits<double>::infinity(), work.cluster.devices[d].memory_bytes);
  }

  // Nothing that fails here is the user's fault: a memory partition that
  // cannot fit, or a schedule the shape refuses, drops the point.
  std::optional<Candidate> Evaluate(Candidate c, bool use_bound) {
    work.pipeline.stages = c.stages;
    work.pipeline.schedule = c.schedule;
    work.pipeline.chunks = c.chunks;
    work.pipeline.recompute = c.recompute;
    work.pipeline.partition = c.partition;
    work.pipeline.first_layers.clear();
    work.training.batch = c.batch;
    work.training.micro_batches = c.micro_batches;
    partition::PlanOverrides overrides;
    overrides.verify = false;
    PlanKey key{c.stages, c.replicas, c.micro_batches, c.schedule, c.chunks, static_cast<int>(c.recompute), {}};
    Bound bound = Bound::kNone;
    bool known = false;
    overrides.before_passes = [&](const partition::Plan& skeleton) {
      for (const auto& cell : skeleton.partition.cells) std::get<6>(key).push_back(cell.first_layer);
      known = memo.count(key) > 0;
      if (!known && use_bound) bound = Bounded(skeleton, c);
      return !known && bound == Bound::kNone;
    };
    auto plan = partition::PlanFromConfig(work, overrides);
    if (bound == Bound::kBeaten) ++bounded;
    if (bound != Bound::kNone) return std::nullopt;
    if (!plan && !known) return std::nullopt;
    auto it = memo.find(key);
    if (it == memo.end()) {
      const ir::Schedule& s = plan->schedule;
      const simulate::SimCosts costs = simulate::CostsFromPlan(work, *plan);
      auto sim = simulate::Simulate(s, costs);
      if (!sim) return std::nullopt;
      ++simulated;
      Outcome o{sim->step_time_s, sim->bubble_fraction, {}};
      for (const auto& d : sim->devices) o.peaks.push_back(d.peak_memory_bytes);
      it = memo.emplace(std::move(key), std::move(o)).first;
    }
    const Outcome& o = it->second;
    c.step_time_s = o.step_time_s;
    c.bubble_fraction = o.bubble_fraction;
    c.throughput = o.step_time_s > 0 ? static_cast<double>(c.batch) * c.replicas / o.step_time_s : 0;
    c.fits = true;
    for (size_t d = 0; d < o.peaks.size(); ++d) {
      c.peak_memory_bytes = std::max(c.peak_memory_bytes, o.peaks[d]);
      if (o.peaks[d] > Limit(static_cast<int>(d))) c.fits = false;
    }
    if (c.fits) Remember(c.throughput, c.peak_memory_bytes);
    return c;
  }

  // Lower bounds on the step time and the peak: device d starts no earlier
  // than micro-batch 0's forward reaches its first stage, then is busy for
  // its ops' summed time; it holds its static bytes plus, on each stage, the
  // stash of its most in-flight micro-batches while the last one's forward
  // runs. A point over the cap on the bound, or that a fitting point
  // already beats on both bounds, needs no simulation: it cannot fit, be
  // best or be on the front.
  enum class Bound { kNone, kOverCap, kBeaten };
  Bound Bounded(const partition::Plan& skeleton, const Candidate& c) {
    const ir::Schedule& s = skeleton.schedule;
    const simulate::SimCosts costs = simulate::CostsFromPlan(work, skeleton);
    const int F = simulate::ComputeSlot(ir::OpKind::kForward), R = simulate::ComputeSlot(ir::OpKind::kRecompute);
    const std::vector<int> in_flight = cost::InFlightPerStage(s);
    std::vector<double> busy(costs.step_s), head(s.num_devices, 0.0), stash(s.num_devices, 0.0);
    std::vector<int> first_stage(s.num_devices, s.num_stages);
    for (int st = 0; st < s.num_stages; ++st) {
      const int d = s.placement[st];
      first_stage[d] = std::min(first_stage[d], st);
      const double act = costs.activation_bytes[st];
      const double held = c.recompute == ir::RecomputeMode::kNone ? act : std::min(act, costs.input_bytes[st]);
      stash[d] = std::max(stash[d], (in_flight[st] - 1) * held + act);
    }
    double before = 0;  // forwards of the stages before stage st, micro-batch 0
    for (int st = 0; st < s.num_stages; ++st) {
      if (first_stage[s.placement[st]] == st) head[s.placement[st]] = before;
      before += costs.compute_s[st][F];
    }
    double step_floor = 0, least_peak = 0;
    bool over = false;
    for (int d = 0; d < s.num_devices; ++d) {
      for (const ir::Op& op : s.programs[d]) {
        const int slot = simulate::ComputeSlot(op.kind);
        if (slot >= 0) busy[d] += costs.compute_s[op.stage][slot];
        const bool recomputed = c.recompute == ir::RecomputeMode::kFull ||
                                (c.recompute == ir::RecomputeMode::kExceptLast && op.micro_batch != c.micro_batches - 1);
        if (op.kind == ir::OpKind::kForward && recomputed) busy[d] += costs.compute_s[op.stage][R];
      }
      step_floor = std::max(step_floor, head[d] + busy[d]);
      const double peak = costs.static_bytes[d] + stash[d];
      least_peak = std::max(least_peak, peak);
      over = over || peak > Limit(d);
    }
    if (over) return Bound::kOverCap;
    const double most_throughput = static_cast<double>(c.batch) * c.replicas / step_floor;
    for (const auto& [throughput, peak] : front) {
      if (throughput >= most_throughput && peak <= least_peak) return Bound::kBeaten;
    }
    return Bound::kNone;
  }

  void Remember(double throughput, double peak) {
    for (const auto& [t, p] : front) {
      if (t >= throughput && p <= peak) return;
    }
    std::erase_if(front, [&](const auto& q) { return throughput >= q.first && peak <= q.second; });
    front.emplace_back(throughput, peak);
  }
};

// The grid, in a fixed order (ties in the ranking go to the earlier point).
std::vector<Candidate> Grid(const cost::Config& c, int devices, int64_t global_batch) {
  const int L = static_cast<int>(c.model.layers.size());
  std::vector<std::string> partitions;
  for (const auto& a : cost::PartitionAlgorithms()) {
    if (a != "manual") partitions.push_back(a);
  }
  std::vector<Candidate> grid;
  for (int K = 1; K <= devices; ++K) {
    const int R = devices / K;
    if (devices % K != 0 || K > L || global_batch % R != 0) continue;
    const int64_t batch = global_batch / R;
    for (int64_t M : Divisors(batch) | std::views::reverse) {  // many micro-batches first: small bubbles, good bounds early
      for (const std::string& name : ir::BuilderNames()) {
        std::vector<int> chunk_counts{ir::DefaultChunks(name)};
        if (name == "interleaved") chunk_counts = {2, 4, 8};
        for (int v : chunk_counts) {
          if (v > 1 && (K == 1 || static_cast<int64_t>(K) * v > L)) continue;
          if (name == "interleaved" && M % K != 0) continue;
          for (auto mode : {ir::RecomputeMode::kNone, ir::RecomputeMode::kFull, ir::RecomputeMode::kExceptLast}) {
            for (const auto& algorithm : partitions) {
              Candidate cand;
              cand.stages = K;
              cand.replicas = R;
              cand.micro_batches = static_cast<int>(M);
              cand.schedule = name;
              cand.chunks = v;
              cand.recompute = mode;
              cand.partition = algorithm;
              cand.batch = batch;
              grid.push_back(std::move(cand));
            }
          }
        }
      }
    }
  }
  return grid;
}

// Not beaten on both throughput and peak memory by any other point.
std::vector<Candidate> ParetoFront(std::vector<Candidate> fits) {
  std::stable_sort(fits.begin(), fits.end(), [](const Candidate& a, const Candidate& b) {
    if (a.throughput != b.throughput) return a.throughput > b.throughput;
    return a.peak_memory_bytes < b.peak_memory_bytes;
  });
  std::vector<Candidate> front;
  for (auto& c : fits) {
    if (front.empty() || c.peak_memory_bytes < front.back().peak_memory_bytes) front.push_back(std::move(c));
  }
  return front;
}

}  // namespace

Result<SearchResult> Search(const cost::Config& config, const SearchOptions& o) {
  const auto start = Clock::now();
  // Thousands of plans of similar size come and go: keep freed memory for
  // the next instead of handing it back to the kernel and faulting it in
  // again (a fifth of the time otherwise). Process-wide, and harmless.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  auto resized = Resize(config, o.devices);
  if (!resized) return tl::unexpected(resized.error());
  Searcher searcher{std::move(*resized), o.memory_cap_bytes};
  const int devices = searcher.work.cluster.NumDevices();
  const int64_t global_batch = config.training.batch * config.Replicas();
  const std::vector<Candidate> grid = Grid(searcher.work, devices, global_batch);
  SearchResult r;
  std::vector<Candidate> fits;
  for (size_t i = 0; i < grid.size(); ++i) {
    if (o.progress && i % 64 == 0) o.progress(static_cast<int64_t>(i), static_cast<int64_t>(grid.size()));
    const int64_t bounded_before = searcher.bounded;
    auto c = searcher.Evaluate(grid[i], true);
    ++r.configs_evaluated;
    if (searcher.bounded != bounded_before) continue;
    if (!c || !c->fits) {
      ++r.over_cap;
      continue;
    }
    fits.push_back(std::move(*c));
  }
  r.configs_simulated = searcher.simulated;
  r.configs_bounded = searcher.bounded;
  if (o.progress) o.progress(static_cast<int64_t>(grid.size()), static_cast<int64_t>(grid.size()));
  r.pareto = ParetoFront(std::move(fits));
  if (!r.pareto.empty()) r.best = o.objective == Objective::kThroughput ? r.pareto.front() : r.pareto.back();
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

nlohmann::ordered_json CandidateConfig(const nlohmann::ordered_json& original, const Candidate& c, int devices) {
  nlohmann::ordered_json j = original;
  auto& pipeline = j["pipeline"];
  pipeline["stages"] = c.stages;
  pipeline["schedule"] = c.schedule;
  if (c.chunks != ir::DefaultChunks(c.schedule) || pipeline.contains("chunks")) pipeline["chunks"] = c.chunks;
  pipeline["recompute"] = std::string(ir::RecomputeModeName(c.recompute));
  pipeline["partition"] = c.partition;
  pipeline.erase("first_layers");
  j["training"]["batch"] = c.batch;
  j["training"]["microbatches"] = c.micro_batches;
  if (j["cluster"].contains("device") && j["cluster"]["device"].is_string()) j["cluster"]["devices"] = devices;
  return j;
}

Result<std::vector<MaxLayersRow>> MaxLayers(const cost::Config& config, const SearchOptions& o) {
  if (config.generator.empty()) {
    return Fail(fmt::format("{}: /model: --max-layers needs a generator model (transformer, mlp or cnn), "
                            "not a list of layers", config.source));
  }
  auto resized = Resize(config, o.devices);
  if (!resized) return tl::unexpected(resized.error());
  Searcher searcher{std::move(*resized), o.memory_cap_bytes};
  cost::Config& work = searcher.work;
  const int devices = work.cluster.NumDevices();
  const int min_layers = config.mlp ? 2 : 1;
  // Fills the row for `layers` and says whether it fits.
  auto fits = [&](int K, ir::RecomputeMode mode, int layers, MaxLayersRow& row) {
    cost::Regenerate(work, layers);
    if (static_cast<int>(work.model.layers.size()) < K) return false;
    Candidate c;
    c.stages = K;
    c.replicas = devices / K;
    c.micro_batches = config.training.micro_batches;
    c.schedule = config.pipeline.schedule;
    c.chunks = config.pipeline.Chunks();
    c.recompute = mode;
    c.batch = config.training.batch;
    if (static_cast<int64_t>(K) * c.chunks > static_cast<int64_t>(work.model.layers.size())) return false;
    if (c.schedule == "interleaved" && c.micro_batches % K != 0) return false;
    // The time-balanced cut first; the memory-aware one (quadratic in the
    // layers) where that overflows and the model is small enough.
    c.partition = "minmax";
    searcher.memo.clear();  // the model changed under the keys
    auto e = searcher.Evaluate(c, false);
    if ((!e || !e->fits) && layers <= kMemoryPartitionLayers) {
      c.partition = "memory";
      e = searcher.Evaluate(c, false);
    }
    if (!e || !e->fits) return false;
    row.max_layers = layers;
    row.peak_memory_bytes = e->peak_memory_bytes;
    return true;
  };
  std::vector<MaxLayersRow> rows;
  for (int K = 1; K <= devices; ++K) {
    if (devices % K != 0) continue;
    for (auto mode : {ir::RecomputeMode::kNone, ir::RecomputeMode::kFull}) {
      MaxLayersRow row{K, mode, 0, 0};
      int lo = min_layers;  // largest known to fit, once one does
      while (lo < kMostLayers && !fits(K, mode, lo, row)) {
        if (static_cast<int>(work.model.layers.size()) >= K) break;  // the smallest useful depth does not fit
        ++lo;
      }
      if (row.max_layers > 0) {
        int hi = lo;  // grow until it does not fit, then bisect
        while (hi < kMostLayers && fits(K, mode, hi * 2, row)) hi *= 2;
        int bad = std::min(hi * 2, kMostLayers);
        MaxLayersRow probe = row;
        while (bad - hi > 1) {
          const int mid = hi + (bad - hi) / 2;
          if (fits(K, mode, mid, probe)) {
            hi = mid;
            row = probe;
          } else {
            bad = mid;
          }
        }
      }
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace twinpipe::search
