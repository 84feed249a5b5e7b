#include "search/search.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
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
using PlanKey = std::tuple<int, int, int, std::string, int, int, int, bool, std::vector<int>>;

// A partition and the costs of the plans it makes (which read only the
// cells and the placement), shared by the points whose cut cannot differ.
struct Cut {
  cost::Plan skeleton;  // the partition, and the schedule's placement without programs
  simulate::SimCosts costs;
};
// What a cut depends on: tensor and sequence parallelism, recompute, the
// replica's batch and micro-batches, the algorithm, and the shape's class
// (its placement and in-flight counts: see Searcher::Shape).
using CutKey = std::tuple<int, bool, int, int64_t, int, cost::PartitionAlgorithm, int>;
// What a time-balancing cut (gpipe, minmax) depends on: the layers' times
// and the cuts' transfers, that is tensor and sequence parallelism, whether
// R runs (none, full or except-last, selective), the micro-batch size and
// the placement; not the in-flight counts or the memory.
using TimeCutKey = std::tuple<int, bool, int, int64_t, cost::PartitionAlgorithm, std::vector<int>>;
// What a cut's report and costs read: a CutKey's but the algorithm, and the
// cells (algorithms that cut alike share them).
using DescribedKey = std::tuple<int, bool, int, int64_t, int, int, std::vector<int>>;

// A point's lower bounds (or why it cannot be run at all).
struct Bounds {
  bool runs = false;          // its shape builds and its partition exists
  bool over_cap = false;      // even the lower bound on memory is over the cap
  double most_throughput = 0; // from the lower bound on the step time
  double least_peak = 0;
  bool over_cap_whatever_the_cut = false;  // over the cap by the totals alone (then no partition is made)
};

// Running state of one search: the grid point's settings written into a
// scratch config, a cache of built shapes, the memo of simulated
// plans and the fitting points so far.
struct Searcher {
  cost::Config work;
  double cap = 0;
  const simulate::Calibration* calibration = nullptr;
  bool check = false;  // SearchOptions::check_bounds: every bound is taken in full
  // A compute-only schedule, its in-flight counts and, per device, the stage
  // whose input gradient its last compute op makes (-1: it makes none).
  struct Shape {
    ir::Schedule schedule;
    std::vector<int> in_flight;        // what the partition assumes
    std::vector<int> least_in_flight;  // what the peak is at least (auto: 1; it fits its cap)
    std::vector<int> last_backward_stage;
    // Per stage, how many of each compute op kind (by ComputeSlot) it runs;
    // and whether its backwards are B's, I's or both.
    std::vector<std::array<int, 5>> ops;
    std::vector<char> has_whole, has_input;
    int cut_class = 0;  // shapes with equal placement and in-flight counts are cut alike
  };
  std::map<std::tuple<std::string, int, int, int>, std::optional<Shape>> shapes;  // by (schedule, K, M, chunks)
  std::map<std::pair<std::vector<int>, std::vector<int>>, int> cut_classes;      // (placement, in flight)
  std::map<CutKey, std::shared_ptr<const Cut>> cuts;  // null: no partition exists
  std::map<TimeCutKey, std::optional<std::vector<int>>> time_cuts;  // first layers; nothing: none
  std::map<DescribedKey, std::shared_ptr<const Cut>> described;
  std::map<PlanKey, Outcome> memo;
  std::map<PlanKey, double> peak_bounds;  // PeakBound's, by plan
  std::vector<std::pair<double, double>> front;  // (throughput, peak) of fitting points, none dominating another
  int64_t simulated = 0;

  // The model changed under the keys (MaxLayers regenerates it).
  void ForgetTheModel() {
    memo.clear();
    cuts.clear();
    time_cuts.clear();
    described.clear();
    peak_bounds.clear();
  }

  double Limit(int d) const {
    return std::min(cap > 0 ? cap : std::numeric_limits<double>::infinity(), work.cluster.devices[d].memory_bytes);
  }

  void Use(const Candidate& c) {
    cost::SetParallelism(work, c.tensor_parallel, c.sequence_parallel, c.recompute);
    work.pipeline.stages = c.stages;
    work.pipeline.schedule = c.schedule;
    work.pipeline.chunks = c.chunks;
    work.pipeline.partition = c.partition;
    work.pipeline.first_layers.clear();
    work.training.batch = c.batch;
    work.training.micro_batches = c.micro_batches;
  }

  // The point's compute-only shape (built once per schedule, K, M and
  // chunks); null when the schedule refuses it.
  const Shape* ShapeOf(const Candidate& c) {
    auto& shape = shapes[{c.schedule, c.stages, c.micro_batches, c.chunks}];
    if (shape) return &*shape;
    // `auto` runs its shape's ops (the last on every device a W) and partition.
    const bool automatic = c.schedule == ir::kAutoSchedule;
    auto built = ir::BuildShape(c.schedule, c.stages, c.micro_batches, c.chunks);
    if (!built) return nullptr;
    Shape sh{std::move(*built), {}, {}, {}};
    sh.in_flight = cost::InFlightPerStage(sh.schedule);
    sh.least_in_flight = automatic ? std::vector<int>(sh.in_flight.size(), 1) : sh.in_flight;
    sh.ops.assign(sh.schedule.num_stages, {});
    sh.has_whole.assign(sh.schedule.num_stages, 0);
    sh.has_input.assign(sh.schedule.num_stages, 0);
    for (const auto& program : sh.schedule.programs) {
      int last = -1;
      for (const ir::Op& op : program) {
        const int slot = simulate::ComputeSlot(op.kind);
        if (slot < 0) continue;  // STEP: no stage
        last = ir::IsInputBackward(op.kind) ? op.stage : -1;
        ++sh.ops[op.stage][slot];
        sh.has_whole[op.stage] |= op.kind == ir::OpKind::kBackward;
        sh.has_input[op.stage] |= op.kind == ir::OpKind::kBackwardInput;
      }
      sh.last_backward_stage.push_back(last);
    }
    sh.cut_class = cut_classes.try_emplace({sh.schedule.placement, sh.in_flight}, static_cast<int>(cut_classes.size()))
                       .first->second;
    shape = std::move(sh);
    return &*shape;
  }

  // The point's partition and costs (Use(c) first), computed once per cut
  // key (a time-balancing cut once per TimeCutKey, a report and costs once
  // per DescribedKey); null when no partition exists.
  const Cut* CutOf(const Candidate& c, const Shape& shape) {
    auto [it, fresh] = cuts.try_emplace(CutKey{c.tensor_parallel, c.sequence_parallel, static_cast<int>(c.recompute),
                                               c.batch, c.micro_batches, c.partition, shape.cut_class});
    if (!fresh) return it->second.get();
    const ir::Schedule& s = shape.schedule;
    std::optional<std::vector<int>> firsts;
    if (c.partition == cost::PartitionAlgorithm::kGpipe || c.partition == cost::PartitionAlgorithm::kMinMax) {
      const int runs_r = c.recompute == ir::RecomputeMode::kSelective ? 2 : ir::InsertsRecompute(c.recompute) ? 1 : 0;
      auto [cut, solve] = time_cuts.try_emplace(TimeCutKey{c.tensor_parallel, c.sequence_parallel, runs_r,
                                                           c.batch / c.micro_batches, c.partition, s.placement});
      if (solve) {
        if (auto f = partition::CutForSchedule(work, s, shape.in_flight)) cut->second = std::move(*f);
      }
      firsts = cut->second;
    } else if (auto f = partition::CutForSchedule(work, s, shape.in_flight)) {
      firsts = std::move(*f);
    }
    if (!firsts) return nullptr;
    auto [d, describe] = described.try_emplace(DescribedKey{c.tensor_parallel, c.sequence_parallel,
                                                            static_cast<int>(c.recompute), c.batch, c.micro_batches,
                                                            shape.cut_class, *firsts});
    if (describe) {
      // The costs need the placement only: a shape without programs.
      cost::Plan skeleton{partition::DescribeForSchedule(work, s, shape.in_flight, *firsts),
                          ir::Schedule{s.num_stages, s.num_micro_batches, s.num_devices, c.replicas, s.placement, {}}};
      simulate::SimCosts costs = simulate::CostsFromPlan(work, skeleton, calibration);
      d->second = std::make_shared<const Cut>(Cut{std::move(skeleton), std::move(costs)});
    }
    it->second = d->second;
    return it->second.get();
  }

  // Whatever the cut, the fullest device holds at least the mean over the
  // devices of what they hold for good (every parameter's bytes, the
  // optimizer's included) and of the activation a forward of one of its
  // stages allocates while it runs (one micro-batch's; a device with v
  // stages, at least 1/v of theirs): a point over the cap by that needs no
  // partition, shape or cost table (Use(c) first).
  bool OverCapWhateverTheCut(const Candidate& c) const {
    double params = 0, stash = 0;
    for (const auto& layer : work.model.layers) params += layer.params, stash += layer.stash_bytes;
    const double micro_batch = static_cast<double>(c.batch) / c.micro_batches;
    const double least = (params * work.training.bytes_per_param + stash * micro_batch / c.chunks) / c.stages;
    double limit = 0;
    for (int d = 0; d < c.stages; ++d) limit = std::max(limit, Limit(d));
    return least > limit * (1 + 1e-9);  // beyond the rounding of sums taken in another order
  }

  // Lower bounds on the step time and the peak, without building comm or
  // simulating: device d starts no earlier than micro-batch 0's forward
  // (and its transfers) reaches its first stage, is then busy for its ops'
  // summed time, and then takes its optimizer step or, when its last op made
  // the input gradient of stage s, waits for the stages below s to pass that
  // gradient down, whichever is longer; it holds its static bytes plus,
  // on each stage, the stash of its most in-flight micro-batches while the
  // last one's forward runs.
  Bounds Bound(const Candidate& c) {
    Use(c);
    Bounds b;
    b.over_cap_whatever_the_cut = OverCapWhateverTheCut(c);
    if (b.over_cap_whatever_the_cut && !check) {
      b.over_cap = true;
      return b;
    }
    const Shape* shape = ShapeOf(c);
    if (!shape) return b;
    const Cut* cut = CutOf(c, *shape);
    if (!cut) return b;
    b.runs = true;
    const ir::Schedule& s = shape->schedule;
    const simulate::SimCosts& costs = cut->costs;
    const int F = simulate::ComputeSlot(ir::OpKind::kForward), R = simulate::ComputeSlot(ir::OpKind::kRecompute);
    const int B = simulate::ComputeSlot(ir::OpKind::kBackward), I = simulate::ComputeSlot(ir::OpKind::kBackwardInput),
              W = simulate::ComputeSlot(ir::OpKind::kBackwardWeight);
    const double M = c.micro_batches;
    const double recomputes = c.recompute == ir::RecomputeMode::kFull         ? M
                              : c.recompute == ir::RecomputeMode::kExceptLast ? M - 1
                                                                              : 0;
    // The quickest way an input gradient leaves a stage: its B, or its I
    // where it splits (the lesser where it does both).
    auto input_gradient = [&](int st) {
      const auto& t = costs.compute_s[st];
      if (shape->has_whole[st] && shape->has_input[st]) return std::min(t[B], t[I]);
      return shape->has_input[st] ? t[I] : t[B];
    };
    // A boundary between devices takes at least its transfer alone on its
    // link (sharing only slows it), as the plan's comm ops carry it (whole
    // bytes), up for the activation and down for its gradient.
    auto transfer = [&](int from, int to) {
      const int src = s.placement[from], dst = s.placement[to];
      if (src == dst) return 0.0;
      const double bytes = static_cast<double>(static_cast<int64_t>(cut->skeleton.partition.cells[std::min(from, to)].boundary_bytes));
      return costs.TransferSeconds(src, dst, bytes);
    };
    std::vector<double> busy(s.num_devices, 0.0), head(s.num_devices, 0.0), stash(s.num_devices, 0.0);
    std::vector<int> first_stage(s.num_devices, s.num_stages);
    double before = 0;  // micro-batch 0's forwards and transfers up to stage st
    std::vector<double> prefix_forward(s.num_stages + 1, 0.0);  // the same, per stage
    // The input gradients of the stages before st and the transfers down to them.
    std::vector<double> below(s.num_stages + 1, 0.0);
    for (int st = 0; st < s.num_stages; ++st) {
      below[st + 1] = below[st] + input_gradient(st) + (st + 1 < s.num_stages ? transfer(st + 1, st) : 0.0);
    }
    for (int st = 0; st < s.num_stages; ++st) {
      const int d = s.placement[st];
      const auto& t = costs.compute_s[st];
      const auto& n = shape->ops[st];  // the compute-only shape: no R yet
      busy[d] += n[F] * t[F] + n[B] * t[B] + n[I] * t[I] + n[W] * t[W] + recomputes * t[R];
      if (st < first_stage[d]) {
        first_stage[d] = st;
        head[d] = before;
      }
      before += t[F] + (st + 1 < s.num_stages ? transfer(st, st + 1) : 0.0);
      prefix_forward[st + 1] = before;
      const double act = costs.activation_bytes[st];
      const double held = !ir::InsertsRecompute(c.recompute) ? act : std::min(act, costs.input_bytes[st]);
      stash[d] = std::max(stash[d], (shape->least_in_flight[st] - 1) * held + act);
    }
    double step_floor = 0;
    // A micro-batch holds memory on stage st from its F's start until its
    // input gradient leaves st, at least the round trip through the stages
    // from st up and back. If at most n such spans overlap (the schedule's
    // program order allows no more; `auto` may reorder, but a point that
    // fits holds no more than its memory allows) they take at least
    // ceil(M / n) round trips one after another.
    for (int st = 0; st < s.num_stages; ++st) {
      const double act = costs.activation_bytes[st];
      const double held = !ir::InsertsRecompute(c.recompute) ? act : std::min(act, costs.input_bytes[st]);
      const int d = s.placement[st];
      int64_t n = c.schedule == ir::kAutoSchedule ? c.micro_batches : std::max(1, shape->in_flight[st]);
      if (held > 0) {
        const double room = (Limit(d) - costs.static_bytes[d] - act) / held;
        if (room < 0) continue;  // over the cap: no bound needed
        if (room + 1 < static_cast<double>(n)) n = static_cast<int64_t>(room) + 1;
      }
      const double round_trip = (before - prefix_forward[st]) + (below[s.num_stages] - below[st]);
      step_floor = std::max(step_floor, static_cast<double>((c.micro_batches + n - 1) / n) * round_trip);
    }
    for (int d = 0; d < s.num_devices; ++d) {
      const int last = shape->last_backward_stage[d];
      // After its last compute op the device steps while the gradient
      // still travels down: whichever is longer.
      step_floor = std::max(step_floor, head[d] + busy[d] + std::max(costs.step_s[d], last >= 0 ? below[last] : 0.0));
      const double peak = costs.static_bytes[d] + stash[d];
      b.least_peak = std::max(b.least_peak, peak);
      b.over_cap = b.over_cap || peak > Limit(d);
    }
    b.most_throughput = static_cast<double>(c.batch) * c.replicas / step_floor;
    return b;
  }

  // The least peak of a fitting point at least `throughput` fast (infinity:
  // none yet): a point whose peak is no less cannot be best or on the front.
  double LeastPeakAtLeast(double throughput) const {
    double least = std::numeric_limits<double>::infinity();
    for (const auto& [t, p] : front) {
      if (t >= throughput) least = std::min(least, p);
    }
    return least;
  }

  // A lower bound on the peak of the point's plan, finer than Bound's (and
  // dearer: a fraction of a plan), by plan; infinity where no plan exists.
  // `auto`, from the start of each variant of its greedy builder
  // (ir::AutoLeastPeak: a tenth of its ops, stopping at `enough`): Bound
  // gives it one micro-batch in flight, far below what the builder holds as
  // it plans to the cap. Other schedules, from their compute stream's own
  // memory walked in program order (Bound counts only the stash at its most
  // in flight, not the I-to-W bytes a zero-bubble schedule holds, nor both
  // at once).
  double PeakBound(const Candidate& c, double enough) {
    Use(c);
    const Shape* shape = ShapeOf(c);
    const Cut* cut = shape ? CutOf(c, *shape) : nullptr;
    if (!cut) return std::numeric_limits<double>::infinity();
    auto [it, fresh] = peak_bounds.try_emplace(KeyOf(c, *cut), 0.0);
    if (!fresh) return it->second;
    const ir::Schedule& s = shape->schedule;
    if (c.schedule == ir::kAutoSchedule) {
      const ir::AutoProblem problem =
          simulate::AutoProblemFor(work, cut->skeleton, cut->costs, simulate::AutoMemoryCap(work, cap));
      const int64_t ops = 3 * int64_t{s.num_stages} * s.num_micro_batches;
      it->second = ir::AutoLeastPeak(problem, cut->costs.static_bytes, std::max<int64_t>(1, ops / 10), enough);
    } else {
      it->second = simulate::ComputeStreamPeak(s, c.recompute, cut->costs);
    }
    return it->second;
  }

  static PlanKey KeyOf(const Candidate& c, const Cut& cut) {
    PlanKey key{c.stages, c.replicas, c.micro_batches, c.schedule, c.chunks, static_cast<int>(c.recompute),
                c.tensor_parallel, c.sequence_parallel, {}};
    for (const auto& cell : cut.skeleton.partition.cells) std::get<8>(key).push_back(cell.first_layer);
    return key;
  }

  // A fitting point already beats these bounds on both axes: the point
  // cannot be best or on the front.
  bool Beaten(const Bounds& b) const {
    for (const auto& [throughput, peak] : front) {
      if (throughput >= b.most_throughput && peak <= b.least_peak) return true;
    }
    return false;
  }

  // Plans and simulates the point (once per distinct plan). Nothing that
  // fails here is the user's fault: a memory partition that cannot fit, or a
  // shape the schedule refuses, drops the point.
  std::optional<Candidate> Simulate(Candidate c) {
    Use(c);
    const Shape* shape = ShapeOf(c);
    if (!shape) return std::nullopt;
    const Cut* cut = CutOf(c, *shape);
    if (!cut) return std::nullopt;
    PlanKey key = KeyOf(c, *cut);
    auto it = memo.find(key);
    if (it == memo.end()) {
      partition::PlanOverrides overrides;
      overrides.verify = false;
      overrides.build_auto = simulate::AutoScheduler(calibration, cap);
      overrides.shape = &shape->schedule;
      overrides.partition = &cut->skeleton.partition;
      auto plan = partition::PlanFromConfig(work, overrides);
      if (!plan) return std::nullopt;
      auto sim = simulate::Simulate(plan->schedule, cut->costs, {.timeline = false});
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

  void Remember(double throughput, double peak) {
    for (const auto& [t, p] : front) {
      if (t >= throughput && p <= peak) return;
    }
    std::erase_if(front, [&](const auto& q) { return throughput >= q.first && peak <= q.second; });
    front.emplace_back(throughput, peak);
  }
};

// Tensor-parallel degrees to try: t = 1, and for a transformer every t that
// divides the GPUs of a node (a group inside one node), the GPUs, the heads,
// the FFN width and the vocabulary.
std::vector<int> TensorParallelDegrees(const cost::Config& c, int devices) {
  std::vector<int> out{1};
  if (!c.transformer) return out;
  const cost::TransformerSpec& t = *c.transformer;
  for (int d = 2; d <= std::min(devices, c.cluster.gpus_per_node); ++d) {
    if (c.cluster.gpus_per_node % d == 0 && devices % d == 0 && t.heads % d == 0 && t.ffn % d == 0 && t.vocab % d == 0) {
      out.push_back(d);
    }
  }
  return out;
}

// The grid, in a fixed order (ties in the ranking go to the earlier point).
std::vector<Candidate> Grid(const cost::Config& c, int devices, int64_t global_batch) {
  const int L = static_cast<int>(c.model.layers.size());
  std::vector<cost::PartitionAlgorithm> partitions;
  for (const auto& [name, a] : cost::kPartitionAlgorithmNames) {
    if (a != cost::PartitionAlgorithm::kManual) partitions.push_back(a);
  }
  std::vector<ir::RecomputeMode> modes{ir::RecomputeMode::kNone, ir::RecomputeMode::kFull,
                                       ir::RecomputeMode::kExceptLast};
  if (c.transformer) modes.push_back(ir::RecomputeMode::kSelective);
  std::vector<Candidate> grid;
  for (int t : TensorParallelDegrees(c, devices)) {
  for (bool sp : t > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
  const int groups = devices / t;
  for (int K = 1; K <= groups; ++K) {
    const int R = groups / K;
    if (groups % K != 0 || K > L || global_batch % R != 0) continue;
    const int64_t batch = global_batch / R;
    for (int64_t M : Divisors(batch) | std::views::reverse) {  // many micro-batches first: small bubbles, good bounds early
      for (const std::string& name : ir::ScheduleNames()) {
        for (int v : ir::ChunkChoices(name)) {
          if (v > 1 && (K == 1 || static_cast<int64_t>(K) * v > L)) continue;
          if (!ir::CheckShape(name, K, static_cast<int32_t>(M), v)) continue;  // the schedule's own rules
          for (auto mode : modes) {
            for (const auto& algorithm : partitions) {
              Candidate cand;
              cand.tensor_parallel = t;
              cand.sequence_parallel = sp;
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
  auto resized = Resize(config, o.devices);
  if (!resized) return tl::unexpected(resized.error());
  Searcher searcher{std::move(*resized), o.memory_cap_bytes, o.calibration, o.check_bounds};
  const int devices = searcher.work.cluster.NumDevices();
  const int64_t global_batch = config.training.batch * config.Replicas();
  const std::vector<Candidate> grid = Grid(searcher.work, devices, global_batch);
  const auto total = static_cast<int64_t>(grid.size());
  SearchResult r;
  r.configs_evaluated = total;
  // Pass 1: every point's bounds (cheap: no comm, no simulation), visited
  // by the model's costs (tensor and sequence parallelism, selective
  // recompute), which change only between groups, so that each is
  // generated once.
  std::vector<Bounds> bounds(grid.size());
  std::vector<size_t> visit(grid.size());
  std::iota(visit.begin(), visit.end(), size_t{0});
  auto model_key = [&](size_t i) {
    return std::tuple(grid[i].tensor_parallel, grid[i].sequence_parallel,
                      grid[i].recompute == ir::RecomputeMode::kSelective);
  };
  std::stable_sort(visit.begin(), visit.end(), [&](size_t a, size_t b) { return model_key(a) < model_key(b); });
  for (size_t k = 0; k < visit.size(); ++k) {
    if (o.progress && k % 256 == 0) o.progress(static_cast<int64_t>(k) / 2, total);
    const Bounds& b = bounds[visit[k]] = searcher.Bound(grid[visit[k]]);
    // The totals' shortcut drops only points the full bound drops.
    if (o.check_bounds && b.over_cap_whatever_the_cut && b.runs && !b.over_cap) {
      return FailRuntime(fmt::format("point {} is over the cap by its totals but not by its bounds", visit[k]));
    }
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < grid.size(); ++i) {
    if (!bounds[i].runs || bounds[i].over_cap) {
      ++r.over_cap;
    } else {
      order.push_back(i);
    }
  }
  // Pass 2: the most promising first, so that the front that skips the rest
  // forms early; a point is simulated unless a fitting one beats its bounds.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bounds[a].most_throughput > bounds[b].most_throughput; });
  std::vector<Candidate> fits;
  for (size_t k = 0; k < order.size(); ++k) {
    if (o.progress && k % 64 == 0) o.progress(total / 2 + static_cast<int64_t>(k) * (total - total / 2) / std::max<int64_t>(1, order.size()), total);
    const size_t i = order[k];
    if (!o.check_bounds && searcher.Beaten(bounds[i])) {
      ++r.configs_bounded;
      continue;
    }
    // The finer bound on the peak, where a fitting point is fast enough for
    // it to matter (tests: always).
    const double enough = o.check_bounds ? std::numeric_limits<double>::infinity()
                                         : searcher.LeastPeakAtLeast(bounds[i].most_throughput);
    if (o.check_bounds || std::isfinite(enough)) {
      bounds[i].least_peak = std::max(bounds[i].least_peak, searcher.PeakBound(grid[i], enough));
      if (!o.check_bounds && searcher.Beaten(bounds[i])) {
        ++r.configs_bounded;
        continue;
      }
    }
    auto c = searcher.Simulate(grid[i]);
    // The throughput bound holds for points that fit (it counts on their
    // memory limiting how many micro-batches overlap).
    if (o.check_bounds && c &&
        ((c->fits && c->throughput > bounds[i].most_throughput * (1 + 1e-12)) ||
         c->peak_memory_bytes < bounds[i].least_peak * (1 - 1e-12))) {
      return FailRuntime(fmt::format("point {} (t={}{} K={} R={} M={} {} v={} recompute {} {}) beats its bounds: {} samples/s (bound {}), peak {} (bound {})", i,
                                     c->tensor_parallel, c->sequence_parallel ? " sp" : "", c->stages, c->replicas, c->micro_batches, c->schedule, c->chunks,
                                     ir::RecomputeModeName(c->recompute), cost::PartitionAlgorithmName(c->partition), c->throughput, bounds[i].most_throughput, c->peak_memory_bytes,
                                     bounds[i].least_peak));
    }
    if (!c || !c->fits) {
      ++r.over_cap;
      continue;
    }
    fits.push_back(std::move(*c));
  }
  r.configs_simulated = searcher.simulated;
  if (o.progress) o.progress(total, total);
  r.pareto = ParetoFront(std::move(fits));
  if (!r.pareto.empty()) r.best = o.objective == Objective::kThroughput ? r.pareto.front() : r.pareto.back();
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

nlohmann::ordered_json CandidateConfig(const nlohmann::ordered_json& original, const Candidate& c, int devices,
                                       double memory_cap) {
  nlohmann::ordered_json j = original;
  auto& pipeline = j["pipeline"];
  // The auto schedule found under the search's cap plans to it again.
  if (c.schedule == ir::kAutoSchedule && memory_cap > 0) {
    pipeline["memory_cap"] = memory_cap;
  } else if (c.schedule != ir::kAutoSchedule) {
    pipeline.erase("memory_cap");
  }
  pipeline["stages"] = c.stages;
  if (c.tensor_parallel > 1 || pipeline.contains("tensor_parallel")) pipeline["tensor_parallel"] = c.tensor_parallel;
  if (c.sequence_parallel || pipeline.contains("sequence_parallel")) pipeline["sequence_parallel"] = c.sequence_parallel;
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

Result<std::vector<MaxLayersRow>> MaxLayers(const cost::Config& config, const SearchOptions& o) {
  if (config.generator.empty()) {
    return Fail(fmt::format("{}: /model: --max-layers needs a generator model (transformer, mlp or cnn), "
                            "not a list of layers", config.source));
  }
  auto resized = Resize(config, o.devices);
  if (!resized) return tl::unexpected(resized.error());
  Searcher searcher{std::move(*resized), o.memory_cap_bytes, o.calibration};
  cost::Config& work = searcher.work;
  const int devices = work.cluster.NumDevices();
  const int min_layers = config.mlp ? 2 : 1;
  // Fills the row for `layers` and says whether it fits.
  auto fits = [&](int K, ir::RecomputeMode mode, int layers, MaxLayersRow& row) {
    cost::Regenerate(work, layers);
    if (static_cast<int>(work.model.layers.size()) < K) return false;
    Candidate c;
    c.tensor_parallel = config.pipeline.tensor_parallel;
    c.sequence_parallel = config.pipeline.sequence_parallel;
    c.stages = K;
    c.replicas = devices / (K * c.tensor_parallel);
    c.micro_batches = config.training.micro_batches;
    c.schedule = config.pipeline.schedule;
    c.chunks = config.pipeline.Chunks();
    c.recompute = mode;
    c.batch = config.training.batch;
    if (static_cast<int64_t>(K) * c.chunks > static_cast<int64_t>(work.model.layers.size())) return false;
    if (!ir::CheckShape(c.schedule, K, c.micro_batches, c.chunks)) return false;
    // The time-balanced cut first; the memory-aware one (quadratic in the
    // layers) where that overflows and the model is small enough.
    c.partition = cost::PartitionAlgorithm::kMinMax;
    searcher.ForgetTheModel();
    auto e = searcher.Simulate(c);
    if ((!e || !e->fits) && layers <= kMemoryPartitionLayers) {
      c.partition = cost::PartitionAlgorithm::kMemory;
      e = searcher.Simulate(c);
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
  const int groups = devices / config.pipeline.tensor_parallel;  // the config's t holds; K x R groups
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
