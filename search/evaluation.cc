#include "search/evaluation.h"

#include <algorithm>
#include <limits>

#include "cost_models/memory_model.h"
#include "ir/builders.h"
#include "partition/pipeline_plan.h"
#include "cost_models/plan_costs.h"

namespace twinpipe::search {

ModelKey ModelOf(const Candidate& c) {
  return ModelKey{c.tensor_parallel, c.sequence_parallel, c.tp_comm_overlap, c.context_parallel,
                  c.recompute == ir::RecomputeMode::kSelective, c.expert_parallel};
}

PlanKey KeyOf(const Candidate& c, const Cut& cut) {
  PlanKey key{c.stages,   c.replicas,  c.micro_batches, c.schedule, c.chunks, static_cast<int>(c.recompute),
              ModelOf(c), static_cast<int>(c.sharding), {}};
  for (const auto& cell : cut.skeleton.partition.cells) std::get<8>(key).push_back(cell.first_layer);
  return key;
}

double Evaluator::Limit(int d) const {
  return std::min(cap > 0 ? cap : std::numeric_limits<double>::infinity(), work_.cluster.devices[d].memory_bytes);
}

void Evaluator::ForgetTheModel() {
  memo_.clear();
  firsts_.clear();
  cuts_.clear();
  time_cuts_.clear();
  described_.clear();
}

void Evaluator::Use(const Candidate& c) {
  // SetParallelism reads the context and expert parallelism and the overlap.
  work_.pipeline.context_parallel = c.context_parallel;
  work_.pipeline.expert_parallel = c.expert_parallel;
  work_.pipeline.tp_comm_overlap = c.tp_comm_overlap;
  work_.training.sharding = c.sharding;
  cost::SetParallelism(work_, c.tensor_parallel, c.sequence_parallel, c.recompute);
  work_.pipeline.stages = c.stages;
  work_.pipeline.schedule = c.schedule;
  work_.pipeline.chunks = c.chunks;
  work_.pipeline.partition = c.partition;
  work_.pipeline.first_layers.clear();
  work_.training.batch = c.batch;
  work_.training.micro_batches = c.micro_batches;
}

const Shape* Evaluator::ShapeOf(const Candidate& c) {
  auto& shape = shapes_[{c.schedule, c.stages, c.micro_batches, c.chunks}];
  if (shape) return &*shape;
  // `auto` runs its shape's ops (the last on every device a W) and partition.
  const bool automatic = c.schedule == ir::kAutoSchedule;
  auto built = ir::BuildShape(c.schedule, c.stages, c.micro_batches, c.chunks);
  if (!built) return nullptr;
  Shape sh{std::move(*built), {}, {}, {}};
  sh.in_flight = cost::InFlightPerStage(sh.schedule);
  sh.least_in_flight = automatic ? std::vector<int>(sh.in_flight.size(), 1) : sh.in_flight;
  std::vector<int> terms;  // the peaks' terms in a row, for the cut class
  for (int mode = 0; mode < static_cast<int>(sh.peaks.size()); ++mode) {
    sh.peaks[mode] = cost::StagePeaks(sh.schedule, static_cast<ir::RecomputeMode>(mode));
    for (const cost::StagePeak& peak : sh.peaks[mode]) {
      terms.push_back(static_cast<int>(peak.terms.size()));
      for (const auto& t : peak.terms) terms.insert(terms.end(), {t.whole, t.kept, t.rebuilt});
    }
  }
  sh.ops.assign(sh.schedule.num_stages, {});
  sh.has_whole.assign(sh.schedule.num_stages, 0);
  sh.has_input.assign(sh.schedule.num_stages, 0);
  for (const auto& program : sh.schedule.programs) {
    int last = -1;
    for (const ir::Op& op : program) {
      sh.paired |= op.paired;
      const int slot = cost::ComputeSlot(op.kind);
      if (slot < 0) continue;  // STEP: no stage
      last = ir::IsInputBackward(op.kind) ? op.stage : -1;
      ++sh.ops[op.stage][slot];
      sh.has_whole[op.stage] |= op.kind == ir::OpKind::kBackward;
      sh.has_input[op.stage] |= op.kind == ir::OpKind::kBackwardInput;
    }
    sh.last_backward_stage.push_back(last);
  }
  sh.cut_class =
      cut_classes_.try_emplace({sh.schedule.placement, std::move(terms)}, static_cast<int>(cut_classes_.size()))
          .first->second;
  shape = std::move(sh);
  return &*shape;
}

const Cut* Evaluator::CutOf(const Candidate& c, const Shape& shape) {
  const ModelKey model = ModelOf(c);
  const FirstsKey firsts_key{model,         static_cast<int>(c.recompute), c.batch, c.micro_batches, c.partition,
                             shape.cut_class,
                             c.partition == cost::PartitionAlgorithm::kMemory ? static_cast<int>(c.sharding) : -1};
  auto [it, fresh] = cuts_.try_emplace(CutKey{firsts_key, static_cast<int>(c.sharding)});
  if (!fresh) return it->second.get();
  const ir::Schedule& s = shape.schedule;
  const std::vector<cost::StagePeak>& peaks = shape.peaks[static_cast<int>(c.recompute)];
  auto [f, cut_now] = firsts_.try_emplace(firsts_key);
  if (cut_now) {
    if (c.partition == cost::PartitionAlgorithm::kGpipe || c.partition == cost::PartitionAlgorithm::kMinMax) {
      const int runs_r = c.recompute == ir::RecomputeMode::kSelective ? 2 : ir::InsertsRecompute(c.recompute) ? 1 : 0;
      auto [cut, solve] =
          time_cuts_.try_emplace(TimeCutKey{model, runs_r, c.batch / c.micro_batches, c.partition, s.placement});
      if (solve) {
        // Where nothing fits the point only counts as over the cap: no search for why.
        auto found = partition::CutForSchedule(work_, s, peaks, calibration, /*explain=*/false);
        if (found) cut->second = std::move(*found);
      }
      f->second = cut->second;
    } else if (auto found = partition::CutForSchedule(work_, s, peaks, calibration, /*explain=*/false)) {
      f->second = std::move(*found);
    }
  }
  if (!f->second) return nullptr;
  const std::vector<int>& firsts = *f->second;
  auto [d, describe] = described_.try_emplace(DescribedKey{model, static_cast<int>(c.recompute), c.batch,
                                                           c.micro_batches, shape.cut_class,
                                                           static_cast<int>(c.sharding), firsts});
  if (describe) {
    // The costs need the placement only: a shape without programs.
    cost::Plan skeleton{partition::DescribeForSchedule(work_, s, peaks, firsts, calibration),
                        ir::Schedule{s.num_stages, s.num_micro_batches, s.num_devices, c.replicas, s.placement, {}}};
    simulate::PlanCosts costs = cost::CostsFromPlan(work_, skeleton, calibration);
    d->second = std::make_shared<const Cut>(Cut{std::move(skeleton), std::move(costs)});
  }
  it->second = d->second;
  return it->second.get();
}

std::optional<Candidate> Evaluator::Simulate(Candidate c) {
  Use(c);
  const Shape* shape = ShapeOf(c);
  if (!shape) return std::nullopt;
  const Cut* cut = CutOf(c, *shape);
  if (!cut) return std::nullopt;
  PlanKey key = KeyOf(c, *cut);
  auto it = memo_.find(key);
  if (it == memo_.end()) {
    partition::PlanOverrides overrides;
    overrides.verify = false;
    overrides.calibration = calibration;
    overrides.memory_cap_bytes = cap;
    overrides.shape = &shape->schedule;
    overrides.partition = &cut->skeleton.partition;
    auto plan = partition::PlanFromConfig(work_, overrides);
    if (!plan) return std::nullopt;
    auto sim = simulate::Simulate(plan->schedule, cut->costs, {.timeline = false});
    if (!sim) return std::nullopt;
    ++simulated_;
    Outcome o{sim->step_time_s, sim->bubble_fraction, {}};
    for (const auto& d : sim->devices) o.peaks.push_back(d.peak_memory_bytes);
    it = memo_.emplace(std::move(key), std::move(o)).first;
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
  return c;
}

}  // namespace twinpipe::search
