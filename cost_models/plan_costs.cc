#include "cost_models/plan_costs.h"

#include <algorithm>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "cost_models/compute_model.h"
#include "cost_models/model.h"

namespace twinpipe::cost {

using ir::OpKind;

int ComputeSlot(OpKind kind) {
  switch (kind) {
    case OpKind::kForward: return 0;
    case OpKind::kBackward: return 1;
    case OpKind::kBackwardInput: return 2;
    case OpKind::kBackwardWeight: return 3;
    case OpKind::kRecompute: return 4;
    default: return -1;
  }
}

bool PlanCosts::Unshared() const {
  if (link.contention != Contention::kPerPair) return false;
  for (int32_t n : node) {
    if (n != node.front()) return inter_node_link.contention == Contention::kPerPair;
  }
  return true;
}

double PlanCosts::GatherSeconds(double bytes) const {
  return BoundaryGatherTime(bytes, boundary_gather_ranks, link);
}

PlanCosts UniformCosts(const ir::Schedule& s, double forward_s, double backward_s) {
  PlanCosts c;
  c.compute_s.assign(s.num_stages, {forward_s, backward_s, backward_s / 2, backward_s / 2, forward_s});
  c.step_s.assign(s.num_devices, 0.0);
  c.link = Link{.name = "free", .latency_s = 0, .bandwidth = std::numeric_limits<double>::infinity()};
  c.activation_bytes.assign(s.num_stages, 0.0);
  c.input_bytes.assign(s.num_stages, 0.0);
  c.static_bytes.assign(s.num_devices, 0.0);
  return c;
}

PlanCosts CostsFromPlan(const Config& config, const Plan& plan, const Calibration* cal) {
  // A fitted device profile replaces the catalogue's figures.
  std::optional<Config> profiled;
  if (cal && cal->profile) profiled = WithProfile(config, *cal);
  const Config& c = profiled ? *profiled : config;
  const ir::Schedule& s = plan.schedule;
  const int32_t K = s.num_stages, D = s.num_devices;
  const double mb = static_cast<double>(c.training.MicroBatchSize());
  const auto cut = CutBytes(c.model);
  PlanCosts costs;
  costs.link = c.cluster.link;
  // Megatron's placement: tensor-parallel groups of t GPUs inside a node,
  // then the pipeline's devices, then the replicas: replica r's device d is
  // GPUs t (d + D r) .. t (d + D r) + t - 1, in node (t (d + D r)) / gpus_per_node.
  const int64_t t = c.pipeline.tensor_parallel, per_node = c.cluster.gpus_per_node;
  if (t * D * s.replicas > per_node) {
    costs.inter_node_link = c.cluster.inter_node_link;
    for (int32_t d = 0; d < D; ++d) {
      costs.node.push_back(c.NodeOf(d));
      int32_t nodes = 1;  // the replicas' nodes ascend: count the changes
      for (int32_t r = 1; r < s.replicas; ++r) {
        nodes += t * (d + int64_t{D} * r) / per_node != t * (d + int64_t{D} * (r - 1)) / per_node;
      }
      costs.replica_nodes = std::max(costs.replica_nodes, nodes);
    }
  }
  // Devices whose executor runs its own sends and receives (the CPU's
  // workers), or a framework whose transfers block compute.
  costs.comm_on_compute_stream = c.pipeline.blocking_p2p ||
                                 std::all_of(c.cluster.devices.begin(), c.cluster.devices.end(),
                                             [](const Device& d) { return d.comm_on_compute; });
  costs.boundary_gather_ranks = c.BoundaryGatherRanks();
  costs.compute_s.assign(K, {});
  costs.activation_bytes.assign(K, 0.0);
  costs.input_bytes.assign(K, 0.0);
  costs.rebuilt_bytes.assign(K, 0.0);
  costs.static_bytes.assign(D, 0.0);
  costs.step_s.assign(D, 0.0);
  std::vector<double> device_params(D, 0.0);
  // The layers' times per device kind, taken once for all the cells on it.
  std::vector<std::pair<const Device*, CalibratedOpTimes>> timed;
  for (int32_t st = 0; st < K; ++st) {
    const auto& cell = plan.partition.cells[st];
    const Device& device = c.cluster.devices[s.placement[st]];
    auto times =
        std::find_if(timed.begin(), timed.end(), [&](const auto& entry) { return SameTiming(*entry.first, device); });
    if (times == timed.end()) {
      timed.emplace_back(&device, CalibratedOpTimes(c, cal, device));
      times = timed.end() - 1;
    }
    for (const ir::OpKind k : CalibratedOpTimes::kKinds) {
      costs.compute_s[st][ComputeSlot(k)] = times->second.Cell(k, cell.first_layer, cell.last_layer);
    }
    const CellActivations held =
        CellActivationsOf(c.model, cut, cell.first_layer, cell.last_layer, c.pipeline.checkpointing);
    costs.activation_bytes[st] = held.stash * mb;
    costs.input_bytes[st] = held.kept * mb;
    costs.rebuilt_bytes[st] = held.rebuilt * mb;
    costs.static_bytes[s.placement[st]] += cell.params * c.training.bytes_per_param;
    device_params[s.placement[st]] += cell.params;
  }
  for (int32_t d = 0; d < D; ++d) {
    // The optimizer streams what it reads and writes (OptimizerStepBytes).
    const Device& device = c.cluster.devices[d];
    costs.step_s[d] = OptimizerStepTime(c.training.optimizer, c.model.dtype, device_params[d], device);
    if (cal && cal->step_overhead_s && cal->step_seconds_per_param) {
      costs.step_s[d] = *cal->step_overhead_s + *cal->step_seconds_per_param * device_params[d];
    }
  }
  if (cal && cal->latency_s) costs.link.latency_s = *cal->latency_s;
  if (cal && cal->bandwidth) costs.link.bandwidth = *cal->bandwidth;
  return costs;
}

double MemoryAtStart(const ir::Dependencies& deps, const PlanCosts& c, const ir::Op& op) {
  if (op.kind == OpKind::kForward) return c.HeldBytes(op.stage, deps.Recomputed(op.stage, op.micro_batch));
  if (op.kind == OpKind::kRecompute) return c.RebuiltBytes(op.stage) - c.input_bytes[op.stage];
  return 0;
}

double MemoryAtEnd(const ir::Dependencies& deps, const PlanCosts& c, const ir::Op& op) {
  double delta = 0;
  const bool recomputed = ComputeSlot(op.kind) >= 0 && deps.Recomputed(op.stage, op.micro_batch);
  if (op.kind == OpKind::kForward && recomputed) delta += c.input_bytes[op.stage] - c.RebuiltBytes(op.stage);
  if (op.kind == OpKind::kBackward) delta -= c.HeldBytes(op.stage, recomputed);
  if (op.kind == OpKind::kBackwardInput) {
    delta -= c.HeldBytes(op.stage, recomputed) - c.PendingBytes(op.stage, recomputed);
  }
  if (op.kind == OpKind::kBackwardWeight) delta -= c.PendingBytes(op.stage, recomputed);
  const int32_t recv = deps.InputRecv(op);
  if (recv >= 0) delta -= static_cast<double>(deps.OpOn(op.device, recv).bytes);  // the consumed receive buffer
  return delta;
}

double ComputeStreamPeak(const ir::Schedule& s, ir::RecomputeMode recompute, const PlanCosts& c) {
  const int32_t M = s.num_micro_batches;
  // An R the schedule already has keeps InsertRecompute from adding one.
  std::vector<char> has_recompute;
  for (const auto& program : s.programs) {
    for (const ir::Op& op : program) {
      if (op.kind != OpKind::kRecompute) continue;
      if (has_recompute.empty()) has_recompute.assign(static_cast<size_t>(s.num_stages) * M, 0);
      has_recompute[static_cast<size_t>(op.stage) * M + op.micro_batch] = 1;
    }
  }
  auto recomputed = [&](const ir::Op& op) {
    if (!has_recompute.empty() && has_recompute[static_cast<size_t>(op.stage) * M + op.micro_batch]) return true;
    return ir::InsertsRecompute(recompute) && !(recompute == ir::RecomputeMode::kExceptLast && op.micro_batch == M - 1);
  };
  double peak = 0;
  for (int32_t d = 0; d < s.num_devices; ++d) {
    double now = 0, most = 0;
    for (const ir::Op& op : s.programs[d]) {
      if (op.stage < 0) continue;  // STEP, all-reduce
      const bool again = recomputed(op);
      const double held = c.HeldBytes(op.stage, again), input = c.input_bytes[op.stage];
      switch (op.kind) {
        case OpKind::kForward:
          now += held;
          most = std::max(most, now);
          if (again) {
            now += input - held;
            most = std::max(most, now);  // a rise where the kept bytes exceed the rebuilt (a large input)
          }
          break;
        case OpKind::kRecompute:
          now += held - input;
          most = std::max(most, now);
          break;
        case OpKind::kBackward:
        case OpKind::kBackwardInput:
          if (again && (has_recompute.empty() ||
                        !has_recompute[static_cast<size_t>(op.stage) * M + op.micro_batch])) {
            now += held - input;  // the R InsertRecompute puts before it
            most = std::max(most, now);
          }
          now -= op.kind == OpKind::kBackward ? held : held - c.PendingBytes(op.stage, again);
          break;
        case OpKind::kBackwardWeight:
          now -= c.PendingBytes(op.stage, again);
          break;
        default:
          break;
      }
    }
    peak = std::max(peak, c.static_bytes[d] + most);
  }
  return peak;
}

double OpDuration(const ir::Op& op, const PlanCosts& c, int32_t replicas) {
  if (op.kind == OpKind::kStep) return c.step_s[op.device];
  if (op.kind == OpKind::kAllReduce) {
    return CollectiveTime(Kernel::Collective::kAllReduce, static_cast<double>(op.bytes),
                          {.ranks = static_cast<double>(replicas),
                           .nodes = static_cast<double>(c.replica_nodes),
                           .intra = &c.link,
                           .inter = &c.inter_node_link});
  }
  return c.compute_s[op.stage][ComputeSlot(op.kind)];
}

double AutoMemoryCap(const Config& config, double memory_cap_bytes) {
  return memory_cap_bytes > 0 ? memory_cap_bytes : config.pipeline.memory_cap;
}

ir::AutoProblem AutoProblemFor(const Config& config, const Plan& skeleton, const PlanCosts& c,
                               double memory_cap_bytes) {
  const ir::Schedule& s = skeleton.schedule;
  const bool recompute = ir::InsertsRecompute(config.pipeline.recompute);
  ir::AutoProblem p;
  p.stages = s.num_stages;
  p.micro_batches = s.num_micro_batches;
  for (int32_t st = 0; st < s.num_stages; ++st) {
    const auto& t = c.compute_s[st];
    const int32_t device = s.placement[st];
    p.forward_s.push_back(t[ComputeSlot(ir::OpKind::kForward)]);
    p.input_s.push_back(t[ComputeSlot(ir::OpKind::kBackwardInput)] +
                        (recompute ? t[ComputeSlot(ir::OpKind::kRecompute)] : 0.0));
    p.weight_s.push_back(t[ComputeSlot(ir::OpKind::kBackwardWeight)]);
    const double boundary = skeleton.partition.cells[st].boundary_bytes;
    p.comm_s.push_back(st + 1 < s.num_stages ? c.TransferSeconds(device, s.placement[st + 1], boundary) : 0.0);
    // A recomputed micro-batch holds at its most what its forward and R rebuild.
    p.activation_bytes.push_back(c.HeldBytes(st, recompute));
    p.kept_bytes.push_back(recompute ? c.input_bytes[st] : c.activation_bytes[st]);
    p.pending_bytes.push_back(c.PendingBytes(st, recompute));
    p.boundary_bytes.push_back(boundary);
    const double own = config.cluster.devices[device].memory_bytes;
    const double cap = memory_cap_bytes > 0 ? std::min(memory_cap_bytes, own) : own;
    p.limit_bytes.push_back(cap - c.static_bytes[device]);  // buffers: see boundary_bytes
  }
  return p;
}

Result<ir::Schedule> BuildAutoSchedule(const Config& config, const Plan& skeleton, const Calibration* calibration,
                                       double memory_cap_bytes) {
  const PlanCosts costs = CostsFromPlan(config, skeleton, calibration);
  auto s = ir::BuildAuto(AutoProblemFor(config, skeleton, costs, AutoMemoryCap(config, memory_cap_bytes)));
  if (!s) return FailRuntime(fmt::format("{}: the auto schedule: {}", config.source, s.error().message));
  return s;
}

}  // namespace twinpipe::cost
