#include "cost_models/plan_costs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <optional>

#include <fmt/format.h>

#include "cost_models/compute_model.h"
#include "cost_models/model.h"

namespace twinpipe::cost {

using ir::OpKind;

namespace {

// The data-parallel ranks an MoE block's experts are sharded over: the
// expert data-parallel group, 1/e of the others' (Megatron-Core's
// distributed optimizer per group).
double ExpertRanks(const Config& c, double ranks) { return std::max(1.0, ranks / c.pipeline.expert_parallel); }

}  // namespace

double ExpectedMaxOfNormals(double n) {
  if (n <= 1) return 0;
  // E[max] = integral of x n phi(x) Phi(x)^(n-1), by the midpoint rule over
  // [-10, 10] (the density beyond is below 1e-20 for any group size here;
  // on such smooth integrands the rule is exact to 1e-14 at this step). A
  // search asks for a few group sizes many times.
  static thread_local std::map<double, double> known;
  if (const auto it = known.find(n); it != known.end()) return it->second;
  constexpr double kStep = 0.02;
  double sum = 0;
  for (int i = 0; i < 1000; ++i) {
    const double x = -10 + (i + 0.5) * kStep;
    sum += x * std::exp(-x * x / 2) * std::pow(0.5 * std::erfc(-x / std::numbers::sqrt2), n - 1);
  }
  return known[n] = n * sum * kStep / std::sqrt(2 * std::numbers::pi);
}

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
  // then the context-parallel group, then the pipeline's devices and the
  // replicas in the config's order (Config::GpuOf).
  const int64_t gpus = int64_t{c.GpusPerDevice()} * D * s.replicas, per_node = c.cluster.gpus_per_node;
  const int32_t cp = c.pipeline.context_parallel;
  costs.gradient_ranks = s.replicas * cp;
  costs.sharding = costs.gradient_ranks > 1 ? c.training.sharding : DataParallelSharding::kNone;
  // Bytes an element: the weights as gathered (FP8 with fp8_params), the kept gradients.
  const double e = DtypeBytes(c.model.dtype), gradient_e = DtypeBytes(c.training.gradient_dtype);
  const double weight_e = c.training.fp8_params ? 1 : e;
  costs.gather_fraction = weight_e / gradient_e;
  if (gpus > per_node) {
    costs.inter_node_link = c.cluster.inter_node_link;
    for (int32_t d = 0; d < D; ++d) {
      costs.node.push_back(c.NodeOf(d));
      costs.replica_nodes = std::max(costs.replica_nodes, c.GradientNodes(d));
    }
  }
  if (c.cluster.gpus > 0 && c.cluster.gpus < c.cluster.NumDevices()) {
    for (int32_t d = 0; d < D; ++d) costs.gpu.push_back(static_cast<int32_t>(c.GpuOf(0, d, 0) % c.cluster.gpus));
  }
  const CollectiveGroup gradient_group{.ranks = static_cast<double>(costs.gradient_ranks),
                                       .nodes = static_cast<double>(costs.replica_nodes),
                                       .intra = &c.cluster.link,
                                       .inter = &c.cluster.inter_node_link};
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
  costs.stage_buckets.assign(K, 1.0);
  std::vector<CellParams> device_params(D);
  std::vector<double> shared_reduce_s(D, 0.0);
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
    if (times->second.HasAllToAll()) {
      costs.all_to_all_s.resize(K);
      for (const ir::OpKind k : CalibratedOpTimes::kKinds) {
        costs.all_to_all_s[st][ComputeSlot(k)] = times->second.AllToAllCell(k, cell.first_layer, cell.last_layer);
      }
    }
    const int32_t d = s.placement[st];
    // The device's parameters (its copies of shared weights are counted once
    // it holds all its cells, below), and the FP8 GEMMs of the cell's
    // forward: one a linear.
    int fp8_linears = 0;
    for (int i = cell.first_layer; i <= cell.last_layer; ++i) fp8_linears += device_params[d].Add(c.model.layers[i]);
    if (fp8_linears > 0) {
      // FP8 under delayed scaling (Transformer Engine's recipe as
      // Megatron-Core runs it): leaving a chunk's forward, and ending its
      // backward (its input gradients), the stage's whole tensor, context
      // and data-parallel group all-reduces the amaxes its FP8 GEMMs saw
      // (get_amax_reduction_group(with_context_parallel=True)), on the
      // compute stream: 3 floats a linear forward (input, weight, output),
      // 2 backward (output and input gradients). A few bytes: the
      // collective's latency over the group's nodes, and the wait for the
      // group's slowest GPU: each tensor-parallel group (kept in step by its
      // own collectives inside the op) has drifted from the predicted time
      // by drift x sqrt(the work since the group last met, at the previous
      // op's reduction), independently of the others, so the c x replicas
      // groups meet ExpectedMaxOfNormals(c x replicas) standard deviations
      // late. A split backward's weight gradients (W) run before its next
      // meeting: their work counts at the input gradients' (B) one.
      const CollectiveGroup amax_group{
          .ranks = static_cast<double>(int64_t{c.pipeline.tensor_parallel} * cp * s.replicas),
          .nodes = static_cast<double>(gpus > per_node ? c.GradientNodes(d) : 1),
          .intra = &c.cluster.link,
          .inter = &c.cluster.inter_node_link};
      const double forward = CollectiveTime(Kernel::Collective::kAllReduce, 12.0 * fp8_linears, amax_group);
      const double backward = CollectiveTime(Kernel::Collective::kAllReduce, 8.0 * fp8_linears, amax_group);
      const double late = device.drift * ExpectedMaxOfNormals(static_cast<double>(cp) * s.replicas);
      const double weight_s = costs.compute_s[st][ComputeSlot(OpKind::kBackwardWeight)];
      auto meet = [&](OpKind kind, double reduce, double work_after) {
        double& t = costs.compute_s[st][ComputeSlot(kind)];
        t += reduce + late * std::sqrt(t + work_after);
      };
      meet(OpKind::kForward, forward, 0);
      meet(OpKind::kBackward, backward, 0);
      meet(OpKind::kBackwardInput, backward, weight_s);
    }
    costs.stage_buckets[st] =
        std::max(1.0, std::ceil(cell.params / std::max(40e6, 1e6 * costs.gradient_ranks)));
    if (costs.sharding == DataParallelSharding::kFull) {
      // Each layer's weights gathered before its forward (and recompute)
      // and its backward, its gradients reduce-scattered after, beside the
      // cell's compute; the first layer's gather (the last one's reduce-
      // scatter) has nothing before (after) it to hide behind.
      const double layers = cell.last_layer - cell.first_layer + 1;
      const double gather = CollectiveTime(Kernel::Collective::kAllGather, cell.params * weight_e, gradient_group);
      const double scatter = CollectiveTime(Kernel::Collective::kReduceScatter, cell.params * gradient_e, gradient_group);
      auto beside = [&](ir::OpKind kind, double comm) {
        double& t = costs.compute_s[st][ComputeSlot(kind)];
        t = std::max(t, comm) + comm / layers;
      };
      beside(ir::OpKind::kForward, gather);
      beside(ir::OpKind::kRecompute, gather);
      beside(ir::OpKind::kBackwardInput, gather);
      beside(ir::OpKind::kBackwardWeight, scatter);
      beside(ir::OpKind::kBackward, gather + scatter);
    }
    const CellActivations held =
        CellActivationsOf(c.model, cut, cell.first_layer, cell.last_layer, c.pipeline.checkpointing);
    costs.activation_bytes[st] = held.stash * mb;
    costs.input_bytes[st] = held.kept * mb;
    costs.rebuilt_bytes[st] = held.rebuilt * mb;
  }
  // Weights a layer shares with one on another device (tied embeddings): a
  // copy there, and the two copies' gradients all-reduced between the two
  // devices' GPUs before each optimizer step (Megatron's embedding group).
  {
    std::vector<int32_t> device_of(c.model.layers.size(), -1);
    for (int32_t st = 0; st < K; ++st) {
      const auto& cell = plan.partition.cells[st];
      for (int i = cell.first_layer; i <= cell.last_layer; ++i) device_of[i] = s.placement[st];
    }
    for (size_t i = 0; i < c.model.layers.size(); ++i) {
      const Layer& layer = c.model.layers[i];
      if (layer.shares_weights_of < 0 || device_of[i] < 0) continue;
      const int32_t d = device_of[i], other = device_of[layer.shares_weights_of];
      if (other == d || other < 0) continue;
      device_params[d].params += layer.shared_params;
      const CollectiveGroup pair{.ranks = 2,
                                 .nodes = static_cast<double>(gpus > per_node && c.NodeOf(d) != c.NodeOf(other) ? 2 : 1),
                                 .intra = &c.cluster.link,
                                 .inter = &c.cluster.inter_node_link,
                                 .rails = false};
      const double reduce = CollectiveTime(Kernel::Collective::kAllReduce, layer.shared_params * gradient_e, pair);
      shared_reduce_s[d] += reduce;
      shared_reduce_s[other] += reduce;
    }
  }
  const double ranks = costs.gradient_ranks;
  const StaticBytesRule static_bytes = StaticBytesOf(c, ranks);
  for (int32_t d = 0; d < D; ++d) {
    const double experts = device_params[d].expert_params, dense = device_params[d].params - experts;
    const double expert_ranks = ExpertRanks(c, ranks);
    costs.static_bytes[d] = static_bytes(device_params[d]);
    // The optimizer streams what it reads and writes (OptimizerStepBytes),
    // over its shard where it is sharded.
    const double stepped =
        costs.sharding == DataParallelSharding::kNone ? device_params[d].params : dense / ranks + experts / expert_ranks;
    const Device& device = c.cluster.devices[d];
    costs.step_s[d] = OptimizerStepTime(c.training.optimizer, c.model.dtype, stepped, device);
    if (cal && cal->step_overhead_s && cal->step_seconds_per_param) {
      costs.step_s[d] = *cal->step_overhead_s + *cal->step_seconds_per_param * stepped;
    }
    costs.step_s[d] += shared_reduce_s[d];
    // Context parallelism without replicas: the schedule has no ALLREDUCE
    // (it has one replica), yet the c GPUs reduce their gradients; the step
    // waits for it.
    if (s.replicas == 1 && cp > 1 && costs.sharding != DataParallelSharding::kFull) {
      const CollectiveGroup context{.ranks = static_cast<double>(cp), .nodes = static_cast<double>(c.ContextNodes()),
                                    .intra = &c.cluster.link, .inter = &c.cluster.inter_node_link};
      costs.step_s[d] += CollectiveTime(Kernel::Collective::kAllReduce, device_params[d].params * gradient_e, context);
    }
  }
  if (cal && cal->latency_s) costs.link.latency_s = *cal->latency_s;
  if (cal && cal->bandwidth) costs.link.bandwidth = *cal->bandwidth;
  return costs;
}

double OptimizerStateBytes(const std::string& optimizer, Dtype dtype) {
  const double master = HalfStorage(dtype) ? 4 : 0;  // fp32 master weights beside half-precision ones
  return master + (optimizer == "adam" ? 8 : 4);     // Adam's two fp32 moments, or SGD's momentum
}

double StaticBytesPerGpu(const TrainingConfig& training, Dtype dtype, DataParallelSharding sharding, double ranks,
                         double params, double fp8_params, double largest_layer_params) {
  // Transformer Engine keeps an FP8 copy of each FP8 GEMM's weights and its transpose.
  const double fp8_copies = dtype == Dtype::kFp8 ? 2 * fp8_params : 0;
  const double all = params * training.bytes_per_param;
  switch (sharding) {
    case DataParallelSharding::kNone: return all + fp8_copies;
    case DataParallelSharding::kOptimizer: {
      const double state = std::min(training.bytes_per_param, OptimizerStateBytes(training.optimizer, dtype));
      return all - params * state * (1 - 1 / ranks) + fp8_copies;
    }
    case DataParallelSharding::kFull:
      // Everything sharded, and the gathered weights of the layer that runs
      // and of the one prefetched beside it, with their gradients.
      return all / ranks + fp8_copies / ranks + 2 * 2 * largest_layer_params * DtypeBytes(dtype);
  }
  return all;
}

StaticBytesRule StaticBytesOf(const Config& c, double ranks) {
  const double expert_ranks = ExpertRanks(c, ranks);
  // One replica shards nothing.
  const DataParallelSharding sharding = ranks > 1 ? c.training.sharding : DataParallelSharding::kNone;
  return [training = c.training, dtype = c.model.dtype, sharding, ranks, expert_ranks](const CellParams& p) {
    const double experts = p.expert_params, dense = p.params - experts;
    return StaticBytesPerGpu(training, dtype, sharding, ranks, dense, training.fp8_params ? 0 : p.fp8_params,
                             p.largest_layer) +
           (experts > 0 ? StaticBytesPerGpu(training, dtype, sharding, expert_ranks, experts, 0, 0) : 0);
  };
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
    const CollectiveGroup group{.ranks = static_cast<double>(std::max(replicas, c.gradient_ranks)),
                                .nodes = static_cast<double>(c.replica_nodes),
                                .intra = &c.link,
                                .inter = &c.inter_node_link};
    const double bytes = static_cast<double>(op.bytes);
    switch (c.sharding) {
      case DataParallelSharding::kNone: return CollectiveTime(Kernel::Collective::kAllReduce, bytes, group);
      case DataParallelSharding::kFull: return 0;
      case DataParallelSharding::kOptimizer: {
        const auto& t = c.compute_s[op.stage];
        const double backward = t[ComputeSlot(OpKind::kBackward)] > 0
                                    ? t[ComputeSlot(OpKind::kBackward)]
                                    : t[ComputeSlot(OpKind::kBackwardInput)] + t[ComputeSlot(OpKind::kBackwardWeight)];
        const double buckets = c.stage_buckets.empty() ? 1.0 : c.stage_buckets[op.stage];
        const double scatter = CollectiveTime(Kernel::Collective::kReduceScatter, bytes, group);
        const double gather = CollectiveTime(Kernel::Collective::kAllGather, bytes * c.gather_fraction, group);
        return std::max(scatter - backward, scatter / buckets) +
               std::max(gather - t[ComputeSlot(OpKind::kForward)], gather / buckets);
      }
    }
  }
  return c.compute_s[op.stage][ComputeSlot(op.kind)];
}

std::vector<double> OverlappedDurations(const ir::Schedule& s, const PlanCosts& c) {
  std::vector<double> out;
  if (c.all_to_all_s.empty()) return out;
  for (const auto& program : s.programs) {
    for (size_t i = 0; i < program.size(); ++i) {
      if (!program[i].paired) continue;
      const size_t j = ir::PairPartner(program, i);
      if (j == program.size() || !ir::IsInputBackward(program[j].kind)) continue;
      const ir::Op& f = program[i];
      const ir::Op& b = program[j];
      const double tf = OpDuration(f, c, s.replicas), tb = OpDuration(b, c, s.replicas);
      const double af = std::min(tf, c.all_to_all_s[f.stage][ComputeSlot(f.kind)]);
      const double ab = std::min(tb, c.all_to_all_s[b.stage][ComputeSlot(b.kind)]);
      if (af == 0 && ab == 0) continue;
      if (out.empty()) {
        out.resize(static_cast<size_t>(s.NumOps()));
        for (const auto& p : s.programs) {
          for (const ir::Op& op : p) out[op.id] = ir::IsComm(op.kind) ? 0.0 : OpDuration(op, c, s.replicas);
        }
      }
      out[f.id] = tf - std::min(af, tb - ab);
      out[b.id] = tb - std::min(ab, tf - af);
    }
  }
  return out;
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
