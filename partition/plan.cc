#include "partition/plan.h"

#include <memory>

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "cost_models/comm_model.h"
#include "cost_models/memory_model.h"
#include "cost_models/plan_costs.h"

namespace twinpipe::partition {
namespace {

using cost::Config;

bool AllUserCosts(const Config& c) {
  for (const auto& l : c.model.layers) {
    if (!l.cost) return false;
  }
  return true;
}

// The layers' times as the simulator charges them (cost::CostsFromPlan):
// a calibration's device profile in place of the catalogue's figures, its
// op fits, and its link's latency and bandwidth for transfers inside a node.
class Timing {
 public:
  Timing(const Config& c, const cost::Calibration* cal) : cal_(cal) {
    if (cal && cal->profile) profiled_ = cost::WithProfile(c, *cal);
    intra_ = c.cluster.link;
    if (cal && cal->latency_s) intra_.latency_s = *cal->latency_s;
    if (cal && cal->bandwidth) intra_.bandwidth = *cal->bandwidth;
  }
  // The config the layers are timed with.
  const Config& Of(const Config& c) const { return profiled_ ? *profiled_ : c; }
  // Seconds of one micro-batch's F + B (+ R when recomputing) of each layer
  // on the config's device `d`, without the fit's fixed seconds per op.
  std::vector<double> LayerStepTimes(const Config& c, int d) const {
    const Config& use = Of(c);
    const cost::CalibratedOpTimes times(use, cal_, use.cluster.devices[d]);
    const bool recompute = ir::InsertsRecompute(c.pipeline.recompute);
    std::vector<double> step(use.model.layers.size());
    for (size_t i = 0; i < step.size(); ++i) {
      const int layer = static_cast<int>(i);
      step[i] = times.Layer(ir::OpKind::kForward, layer) + times.Layer(ir::OpKind::kBackward, layer);
      if (recompute) step[i] += times.Layer(ir::OpKind::kRecompute, layer);
    }
    return step;
  }
  // The fit's fixed seconds per cell for its F + B (+ R): the same for
  // every cell, so it moves no cut, but the cells' times include it.
  double CellOverhead(const Config& c) const {
    auto overhead = [&](ir::OpKind kind) {
      const cost::OpFit* fit = cost::FitFor(cal_, kind);
      return fit ? fit->overhead_s : 0.0;
    };
    double s = overhead(ir::OpKind::kForward) + overhead(ir::OpKind::kBackward);
    if (ir::InsertsRecompute(c.pipeline.recompute)) s += overhead(ir::OpKind::kRecompute);
    return s;
  }
  const cost::Link& IntraLink() const { return intra_; }

 private:
  const cost::Calibration* cal_;
  std::optional<Config> profiled_;
  cost::Link intra_;
};

// The links a cut's transfer can take, as classes of PartitionProblem::cut_costs.
enum CutLink { kInsideNode = 0, kBetweenNodes = 1, kNoTransfer = 2 };

// The link cell k's outgoing transfer takes, as the simulator charges it
// (PlanCosts::TransferSeconds).
CutLink CutLinkOf(const Config& c, int k, const std::vector<int>* placement) {
  const int K = c.pipeline.stages;
  if (k + 1 >= K) return kNoTransfer;
  const int from = placement ? (*placement)[k] : k, to = placement ? (*placement)[k + 1] : k + 1;
  if (from == to) return kNoTransfer;
  return c.NodeOf(from) != c.NodeOf(to) ? kBetweenNodes : kInsideNode;
}

double CutTime(const Config& c, const Timing& timing, CutLink link, double bytes_per_sample) {
  if (link == kNoTransfer) return 0;
  const double bytes = bytes_per_sample * static_cast<double>(c.training.MicroBatchSize());
  const cost::Link& over = link == kBetweenNodes ? c.cluster.inter_node_link : timing.IntraLink();
  // Activation forward, gradient backward.
  return 2 * cost::BoundaryTransferTime(over, bytes, c.BoundaryGatherRanks(), timing.IntraLink());
}

// Each stage's activation peak: the caller's, walked on the schedule it
// built, or else from building the configured one.
std::vector<cost::StagePeak> Peaks(const Config& c, const std::vector<cost::StagePeak>* given) {
  if (given) return *given;
  return cost::StagePeaks(c.pipeline.schedule, c.pipeline.stages, c.training.micro_batches, c.pipeline.chunks,
                          c.pipeline.recompute);
}

}  // namespace

PartitionProblem BuildProblem(const Config& c, const std::vector<cost::StagePeak>* given_peaks,
                              const std::vector<int>* placement, const cost::Calibration* calibration) {
  const Timing timing(c, calibration);
  const int L = static_cast<int>(c.model.layers.size()), K = c.pipeline.stages;
  PartitionProblem p;
  p.num_layers = L;
  p.num_cells = K;
  const bool user = AllUserCosts(c);
  std::map<std::string, int> class_of_name;
  std::vector<const cost::Device*> classes;
  for (int k = 0; k < K; ++k) {
    const cost::Device& d = c.cluster.devices[k];
    auto [it, fresh] = class_of_name.emplace(d.name, static_cast<int>(classes.size()));
    if (fresh) classes.push_back(&d);
    p.cell_class.push_back(it->second);
  }
  const double reference_peak = classes[0]->PeakFlops(c.model.dtype);
  for (const cost::Device* d : classes) {
    std::vector<double> prefix(L + 1, 0.0);
    const double slowdown = reference_peak / d->PeakFlops(c.model.dtype);
    if (user) {
      for (int i = 0; i < L; ++i) prefix[i + 1] = prefix[i] + *c.model.layers[i].cost * slowdown;
    } else {
      const std::vector<double> step = timing.LayerStepTimes(c, static_cast<int>(d - c.cluster.devices.data()));
      for (int i = 0; i < L; ++i) prefix[i + 1] = prefix[i] + step[i];
    }
    p.prefix.push_back(std::move(prefix));
  }
  const auto cut = cost::CutBytes(c.model);
  p.cut_costs.assign(3, std::vector<double>(std::max(0, L - 1), 0.0));
  if (!user) {
    for (const CutLink link : {kInsideNode, kBetweenNodes}) {
      for (int j = 0; j + 1 < L; ++j) p.cut_costs[link][j] = CutTime(c, timing, link, cut[j]);
    }
  }
  for (int k = 0; k < K; ++k) p.cut_class.push_back(CutLinkOf(c, k, placement));
  // Everything by value: the problem may outlive the config.
  struct Memory {
    cost::CellMemoryTable table;
    std::vector<cost::StagePeak> peaks;
    double bytes_per_param, micro_batch;
    cost::StaticBytesRule static_bytes;
    cost::MemoryInputs In(int k) const { return {bytes_per_param, micro_batch, &peaks[k], &static_bytes}; }
  };
  auto memory = std::make_shared<const Memory>(Memory{cost::CellMemoryTable(c.model, cut, c.pipeline.checkpointing),
                                                      Peaks(c, given_peaks), c.training.bytes_per_param,
                                                      static_cast<double>(c.training.MicroBatchSize()),
                                                      cost::StaticBytesOf(c, c.GradientRanks())});
  p.memory = [memory](int a, int b, int k) { return memory->table.Peak(a, b, memory->In(k)).total_bytes; };
  p.memory_floor = [memory](int a, int b, int k) { return memory->table.Floor(a, b, memory->In(k)); };
  // The memory partition cuts to /pipeline/memory_cap where it is below a device's memory.
  for (int k = 0; k < K; ++k) {
    const double own = c.cluster.devices[k].memory_bytes;
    p.capacity.push_back(c.pipeline.memory_cap > 0 ? std::min(own, c.pipeline.memory_cap) : own);
    p.capped.push_back(p.capacity.back() < own);
  }
  for (const auto& l : c.model.layers) p.layer_names.push_back(l.name);
  return p;
}

PartitionReport DescribePartition(const Config& c, const std::vector<int>& firsts,
                                  const std::vector<cost::StagePeak>* given_peaks,
                                  const std::vector<int>* placement, const cost::Calibration* calibration) {
  const Timing timing(c, calibration);
  const double overhead = timing.CellOverhead(c);
  const int L = static_cast<int>(c.model.layers.size()), K = static_cast<int>(firsts.size());
  const auto cut = cost::CutBytes(c.model);
  const auto peaks = Peaks(c, given_peaks);
  const bool user = AllUserCosts(c);
  const double mb = static_cast<double>(c.training.MicroBatchSize());
  const cost::StaticBytesRule static_bytes = cost::StaticBytesOf(c, c.GradientRanks());
  PartitionReport r;
  r.user_costs = user;
  double total = 0;
  // The layers' step times, taken once per device kind for all its cells.
  std::vector<std::pair<const cost::Device*, std::vector<double>>> timed;
  for (int k = 0; k < K; ++k) {
    CellReport cell;
    cell.first_layer = firsts[k];
    cell.last_layer = k + 1 < K ? firsts[k + 1] - 1 : L - 1;
    cell.device = k;
    const cost::Device& d = c.cluster.devices[k];
    auto times =
        std::find_if(timed.begin(), timed.end(), [&](const auto& entry) { return cost::SameTiming(*entry.first, d); });
    if (times == timed.end()) {
      timed.emplace_back(&d, timing.LayerStepTimes(c, k));
      times = timed.end() - 1;
    }
    cell.time_s = overhead;
    for (int i = cell.first_layer; i <= cell.last_layer; ++i) {
      cell.time_s += times->second[i];
      cell.params += c.model.layers[i].params;
      if (user) cell.cost += *c.model.layers[i].cost;
    }
    if (cell.last_layer + 1 < L) {
      cell.boundary_bytes = cut[cell.last_layer] * mb;
      cell.time_s += CutTime(c, timing, CutLinkOf(c, k, placement), cut[cell.last_layer]);
    }
    if (!user) cell.cost = cell.time_s;
    const cost::MemoryInputs in{c.training.bytes_per_param, mb, &peaks[k], &static_bytes};
    cell.peak_memory_bytes =
        cost::CellPeakMemory(c.model, cut, cell.first_layer, cell.last_layer, c.pipeline.checkpointing, in).total_bytes;
    r.bottleneck_s = std::max(r.bottleneck_s, cell.time_s);
    total += cell.time_s;
    r.cells.push_back(cell);
  }
  r.imbalance = total > 0 ? r.bottleneck_s / (total / K) : 1.0;
  return r;
}

Result<std::vector<int>> MegatronFirstLayers(const Config& c, int cells) {
  const int L = static_cast<int>(c.model.layers.size());
  const int blocks = L - 2;  // the generator's layers: embedding, the blocks, the head
  if (!c.transformer || blocks < 1 || c.model.layers.front().kind != "embedding" ||
      c.model.layers.back().kind != "head") {
    return Fail(fmt::format("{}: /pipeline/partition: the megatron partition splits a generated transformer's blocks",
                            c.source));
  }
  // Units: the blocks, and the embedding and the loss where they count as layers.
  const int first_extra = c.pipeline.account_for_embedding, last_extra = c.pipeline.account_for_loss;
  const int units = blocks + first_extra + last_extra;
  if (units < cells) {
    return Fail(fmt::format("{}: /pipeline/partition: {} cells but only {} blocks{} to share", c.source, cells, blocks,
                            first_extra + last_extra > 0 ? " (and the embedding and loss counted as layers)" : ""));
  }
  // An equal share per cell; where the cells do not divide the units, the
  // first (units mod cells) cells take one more (Megatron-Core asks for a
  // whole share, or an explicit first and last stage: this is its even
  // layout extended).
  std::vector<int> firsts{0};
  int unit = 0;  // units handed out so far
  for (int k = 0; k + 1 < cells; ++k) {
    unit += units / cells + (k < units % cells);
    // Layer index of the unit `unit`: the embedding is layer 0 (a unit only
    // when it counts), block b is layer 1 + b.
    firsts.push_back(1 + unit - first_extra);
  }
  return firsts;
}

Result<std::vector<int>> CutLayers(const Config& c, cost::PartitionAlgorithm algorithm,
                                   const std::vector<cost::StagePeak>* peaks, const std::vector<int>* placement,
                                   const cost::Calibration* calibration, bool explain) {
  PartitionProblem p = BuildProblem(c, peaks, placement, calibration);
  p.explain = explain;
  Result<Partition> part = Partition{};
  switch (algorithm) {
    case cost::PartitionAlgorithm::kGpipe: part = MinVariance(p); break;
    case cost::PartitionAlgorithm::kMinMax: part = MinMax(p); break;
    case cost::PartitionAlgorithm::kMemory: part = MinMaxUnderMemory(p); break;
    case cost::PartitionAlgorithm::kManual:
      part = Manual(p, c.pipeline.first_layers);
      if (!part) return Fail(fmt::format("{}: /pipeline/first_layers{}", c.source, part.error().message));
      break;
    case cost::PartitionAlgorithm::kMegatron: {
      auto firsts = MegatronFirstLayers(c, p.num_cells);
      if (!firsts) return tl::unexpected(firsts.error());
      part = Manual(p, *firsts);
      if (!part) return Fail(fmt::format("{}: /pipeline/partition: {}", c.source, part.error().message));
      break;
    }
  }
  if (!part) {
    return tl::unexpected(Error{fmt::format("{}: {}", c.source, part.error().message), part.error().kind});
  }
  return std::move(part->first_layers);
}

Result<PartitionReport> PlanPartition(const Config& c, cost::PartitionAlgorithm algorithm,
                                      const std::vector<cost::StagePeak>* peaks, const std::vector<int>* placement,
                                      const cost::Calibration* calibration) {
  auto firsts = CutLayers(c, algorithm, peaks, placement, calibration);
  if (!firsts) return tl::unexpected(firsts.error());
  PartitionReport r = DescribePartition(c, *firsts, peaks, placement, calibration);
  r.algorithm = std::string(cost::PartitionAlgorithmName(algorithm));
  return r;
}

}  // namespace twinpipe::partition
