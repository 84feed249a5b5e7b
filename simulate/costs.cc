#include "simulate/costs.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "cost_models/comm_model.h"
#include "cost_models/compute_model.h"
#include "cost_models/model.h"
#include "ir/passes.h"
#include "simulate/dependencies.h"

namespace twinpipe::simulate {

SimCosts CostsFromPlan(const cost::Config& config, const cost::Plan& plan, const Calibration* cal) {
  // A fitted device profile replaces the catalogue's figures.
  std::optional<cost::Config> profiled;
  if (cal && cal->profile) profiled = WithProfile(config, *cal);
  const cost::Config& c = profiled ? *profiled : config;
  const ir::Schedule& s = plan.schedule;
  const int32_t K = s.num_stages, D = s.num_devices;
  const double mb = static_cast<double>(c.training.MicroBatchSize());
  const auto cut = cost::CutBytes(c.model);
  SimCosts costs;
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
                                             [](const cost::Device& d) { return d.comm_on_compute; });
  costs.boundary_gather_ranks = c.BoundaryGatherRanks();
  costs.compute_s.assign(K, {});
  costs.activation_bytes.assign(K, 0.0);
  costs.input_bytes.assign(K, 0.0);
  costs.static_bytes.assign(D, 0.0);
  costs.step_s.assign(D, 0.0);
  std::vector<double> device_params(D, 0.0);
  // The layers' times per device kind, taken once for all the cells on it.
  std::vector<std::pair<const cost::Device*, CalibratedOpTimes>> timed;
  for (int32_t st = 0; st < K; ++st) {
    const auto& cell = plan.partition.cells[st];
    const cost::Device& device = c.cluster.devices[s.placement[st]];
    auto times = std::find_if(timed.begin(), timed.end(),
                              [&](const auto& entry) { return cost::SameTiming(*entry.first, device); });
    if (times == timed.end()) {
      timed.emplace_back(&device, CalibratedOpTimes(c, cal, device));
      times = timed.end() - 1;
    }
    for (const ir::OpKind k : CalibratedOpTimes::kKinds) {
      costs.compute_s[st][ComputeSlot(k)] = times->second.Cell(k, cell.first_layer, cell.last_layer);
    }
    // With recompute a cell keeps its boundary input and the activations of
    // the layers its recompute does not re-run (a head).
    double stash = 0, kept = 0;
    const int end = cost::RematerializedEnd(c.model, cell.first_layer, cell.last_layer);
    for (int i = cell.first_layer; i <= cell.last_layer; ++i) {
      stash += c.model.layers[i].stash_bytes;
      if (i >= end) kept += c.model.layers[i].stash_bytes;
    }
    costs.activation_bytes[st] = stash * mb;
    const double input = cell.first_layer == 0 ? c.model.input_bytes : cut[cell.first_layer - 1];
    costs.input_bytes[st] = kept > 0 ? std::min(stash, input + kept) * mb : input * mb;
    costs.static_bytes[s.placement[st]] += cell.params * c.training.bytes_per_param;
    device_params[s.placement[st]] += cell.params;
  }
  for (int32_t d = 0; d < D; ++d) {
    // The optimizer streams what it reads and writes (cost::OptimizerStepBytes).
    const cost::Device& device = c.cluster.devices[d];
    costs.step_s[d] = cost::OptimizerStepTime(c.training.optimizer, c.model.dtype, device_params[d], device);
    if (cal && cal->step_overhead_s && cal->step_seconds_per_param) {
      costs.step_s[d] = *cal->step_overhead_s + *cal->step_seconds_per_param * device_params[d];
    }
  }
  if (cal && cal->latency_s) costs.link.latency_s = *cal->latency_s;
  if (cal && cal->bandwidth) costs.link.bandwidth = *cal->bandwidth;
  return costs;
}

ir::AutoProblem AutoProblemFor(const cost::Config& config, const cost::Plan& skeleton, const Calibration* cal,
                               double memory_cap_bytes) {
  return AutoProblemFor(config, skeleton, CostsFromPlan(config, skeleton, cal), memory_cap_bytes);
}

double AutoMemoryCap(const cost::Config& config, double memory_cap_bytes) {
  return memory_cap_bytes > 0 ? memory_cap_bytes : config.pipeline.memory_cap;
}

ir::AutoProblem AutoProblemFor(const cost::Config& config, const cost::Plan& skeleton, const SimCosts& c,
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
    p.activation_bytes.push_back(c.activation_bytes[st]);
    p.kept_bytes.push_back(recompute ? c.input_bytes[st] : c.activation_bytes[st]);
    p.pending_bytes.push_back(c.PendingBytes(st));
    p.boundary_bytes.push_back(boundary);
    const double own = config.cluster.devices[device].memory_bytes;
    const double cap = memory_cap_bytes > 0 ? std::min(memory_cap_bytes, own) : own;
    p.limit_bytes.push_back(cap - c.static_bytes[device]);  // buffers: see boundary_bytes
  }
  return p;
}

std::function<Result<ir::Schedule>(const cost::Config&, const cost::Plan&)> AutoScheduler(
    const Calibration* cal, double memory_cap_bytes) {
  return [cal, memory_cap_bytes](const cost::Config& config, const cost::Plan& skeleton) -> Result<ir::Schedule> {
    auto s = ir::BuildAuto(AutoProblemFor(config, skeleton, cal, AutoMemoryCap(config, memory_cap_bytes)));
    if (!s) return FailRuntime(fmt::format("{}: the auto schedule: {}", config.source, s.error().message));
    return s;
  };
}

std::optional<MemoryOverflow> FirstOverflow(const cost::Config& c, const SimResult& r) {
  for (size_t d = 0; d < r.devices.size(); ++d) {
    const double capacity = c.cluster.devices[d].memory_bytes;
    if (r.devices[d].peak_memory_bytes > capacity) {
      return MemoryOverflow{static_cast<int>(d), r.devices[d].peak_memory_bytes, capacity};
    }
  }
  return std::nullopt;
}

}  // namespace twinpipe::simulate
