#include "search/bounds.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "ir/builders.h"
#include "cost_models/plan_costs.h"
#include "simulate/engine.h"

namespace twinpipe::search {

bool LowerBounds::OverCapWhateverTheCut(const Candidate& c) const {
  const cost::Config& work = evaluator_.work();
  double params = 0, stash = 0;
  for (const auto& layer : work.model.layers) params += layer.params, stash += layer.stash_bytes;
  const double micro_batch = static_cast<double>(c.batch) / c.micro_batches;
  // What the devices hold for good, summed: the costs' static bytes (sharded
  // over the gradient's ranks where they are), less the FP8 copies and
  // FSDP's gathered layers, which only add to them.
  const int ranks = c.replicas * c.context_parallel;
  const auto sharding = ranks > 1 ? c.sharding : cost::DataParallelSharding::kNone;
  const double held = cost::StaticBytesPerGpu(work.training, work.model.dtype, sharding, ranks, params, 0, 0);
  // Each stage holds its stash for some micro-batch at once: whole, or
  // rebuilt by R where a cell is recomputed whole. Recomputed layer by
  // layer it holds only its kept inputs and one layer's work: counted none.
  const bool rebuilt_by_layer = ir::InsertsRecompute(c.recompute) &&
                                work.pipeline.checkpointing.granularity == cost::RecomputeGranularity::kLayer;
  if (rebuilt_by_layer) stash = 0;
  const double least = (held + stash * micro_batch / c.chunks) / c.stages;
  double limit = 0;
  for (int d = 0; d < c.stages; ++d) limit = std::max(limit, evaluator_.Limit(d));
  return least > limit * (1 + 1e-9);  // beyond the rounding of sums taken in another order
}

Bounds LowerBounds::Of(const Candidate& c) {
  evaluator_.Use(c);
  Bounds b;
  b.over_cap_whatever_the_cut = OverCapWhateverTheCut(c);
  if (b.over_cap_whatever_the_cut && !check_) {
    b.over_cap = true;
    return b;
  }
  const Shape* shape = evaluator_.ShapeOf(c);
  if (!shape) return b;
  const Cut* cut = evaluator_.CutOf(c, *shape);
  if (!cut) return b;
  b.runs = true;
  const ir::Schedule& s = shape->schedule;
  const simulate::PlanCosts& costs = cut->costs;
  // Paired F/B ops (DualPipeV) hide their all-to-alls behind each other:
  // each takes at least its time less its own all-to-all.
  std::vector<std::array<double, 5>> relaxed;
  if (shape->paired && !costs.all_to_all_s.empty()) {
    relaxed = costs.compute_s;
    for (size_t st = 0; st < relaxed.size(); ++st) {
      for (ir::OpKind kind : {ir::OpKind::kForward, ir::OpKind::kBackward, ir::OpKind::kBackwardInput}) {
        relaxed[st][cost::ComputeSlot(kind)] -= costs.all_to_all_s[st][cost::ComputeSlot(kind)];
      }
    }
  }
  const auto& compute_s = relaxed.empty() ? costs.compute_s : relaxed;
  const int F = cost::ComputeSlot(ir::OpKind::kForward), R = cost::ComputeSlot(ir::OpKind::kRecompute);
  const int B = cost::ComputeSlot(ir::OpKind::kBackward), I = cost::ComputeSlot(ir::OpKind::kBackwardInput),
            W = cost::ComputeSlot(ir::OpKind::kBackwardWeight);
  const double M = c.micro_batches;
  const double recomputes = c.recompute == ir::RecomputeMode::kFull         ? M
                            : c.recompute == ir::RecomputeMode::kExceptLast ? M - 1
                                                                            : 0;
  // The quickest way an input gradient leaves a stage: its B, or its I
  // where it splits (the lesser where it does both).
  auto input_gradient = [&](int st) {
    const auto& t = compute_s[st];
    if (shape->has_whole[st] && shape->has_input[st]) return std::min(t[B], t[I]);
    return shape->has_input[st] ? t[I] : t[B];
  };
  // A boundary between devices takes at least its transfer alone on its
  // link (sharing only slows it), as the plan's comm ops carry it (whole
  // bytes), up for the activation and down for its gradient.
  auto transfer = [&](int from, int to) {
    const int src = s.placement[from], dst = s.placement[to];
    if (src == dst) return 0.0;
    const auto& cell = cut->skeleton.partition.cells[std::min(from, to)];
    const double bytes = static_cast<double>(static_cast<int64_t>(cell.boundary_bytes));
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
    const auto& t = compute_s[st];
    const auto& n = shape->ops[st];  // the compute-only shape: no R yet
    busy[d] += n[F] * t[F] + n[B] * t[B] + n[I] * t[I] + n[W] * t[W] + recomputes * t[R];
    if (st < first_stage[d]) {
      first_stage[d] = st;
      head[d] = before;
    }
    before += t[F] + (st + 1 < s.num_stages ? transfer(st, st + 1) : 0.0);
    prefix_forward[st + 1] = before;
    // The most one micro-batch holds (with recompute, what its forward and R rebuild).
    const double act = costs.HeldBytes(st, ir::InsertsRecompute(c.recompute));
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
    const double act = costs.HeldBytes(st, ir::InsertsRecompute(c.recompute));
    const double held = !ir::InsertsRecompute(c.recompute) ? act : std::min(act, costs.input_bytes[st]);
    const int d = s.placement[st];
    int64_t n = c.schedule == ir::kAutoSchedule ? c.micro_batches : std::max(1, shape->in_flight[st]);
    if (held > 0) {
      const double room = (evaluator_.Limit(d) - costs.static_bytes[d] - act) / held;
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
    b.over_cap = b.over_cap || peak > evaluator_.Limit(d);
  }
  b.most_throughput = static_cast<double>(c.batch) * c.replicas / step_floor;
  return b;
}

double LowerBounds::Peak(const Candidate& c, double enough) {
  evaluator_.Use(c);
  const Shape* shape = evaluator_.ShapeOf(c);
  const Cut* cut = shape ? evaluator_.CutOf(c, *shape) : nullptr;
  if (!cut) return std::numeric_limits<double>::infinity();
  auto [it, fresh] = peak_bounds_.try_emplace(KeyOf(c, *cut), 0.0);
  if (!fresh) return it->second;
  const ir::Schedule& s = shape->schedule;
  if (c.schedule == ir::kAutoSchedule) {
    const ir::AutoProblem problem =
        cost::AutoProblemFor(evaluator_.work(), cut->skeleton, cut->costs,
                                 cost::AutoMemoryCap(evaluator_.work(), evaluator_.cap));
    const int64_t ops = 3 * int64_t{s.num_stages} * s.num_micro_batches;
    it->second = ir::AutoLeastPeak(problem, cut->costs.static_bytes, std::max<int64_t>(1, ops / 2), enough);
  } else {
    it->second = cost::ComputeStreamPeak(s, c.recompute, cut->costs);
  }
  return it->second;
}


}  // namespace twinpipe::search
