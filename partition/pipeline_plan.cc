#include "partition/pipeline_plan.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "ir/builders.h"
#include "ir/passes.h"
#include "ir/pipeline.h"
#include "cost_models/memory_model.h"
#include "cost_models/plan_costs.h"

namespace twinpipe::partition {
namespace {

// Per stage boundary, the bytes a micro-batch sends each way; per stage,
// its gradients' bytes (`gradient_bytes` an element: /training/gradient_dtype).
ir::PipelineOptions Bytes(const PartitionReport& r, int gradient_bytes) {
  ir::PipelineOptions o;
  for (size_t b = 0; b + 1 < r.cells.size(); ++b) {
    o.comm.activation.push_back(static_cast<int64_t>(r.cells[b].boundary_bytes));
  }
  o.comm.gradient = o.comm.activation;
  for (const auto& cell : r.cells) o.gradient_bytes.push_back(static_cast<int64_t>(cell.params * gradient_bytes));
  return o;
}

// A schedule read from a file: the comm and all-reduce ops whose bytes are
// unknown (0) get those Bytes gives.
void FillBytes(ir::Schedule& s, const PartitionReport& r, int gradient_bytes) {
  const ir::PipelineOptions known = Bytes(r, gradient_bytes);
  for (auto& program : s.programs) {
    for (ir::Op& op : program) {
      if (op.bytes != 0) continue;
      if (op.kind == ir::OpKind::kSendF || op.kind == ir::OpKind::kRecvB) {
        op.bytes = known.comm.activation[op.stage];
      } else if (op.kind == ir::OpKind::kRecvF || op.kind == ir::OpKind::kSendB) {
        op.bytes = known.comm.activation[op.stage - 1];
      } else if (op.kind == ir::OpKind::kAllReduce) {
        op.bytes = known.gradient_bytes[op.stage];
      }
    }
  }
}

}  // namespace

Result<Plan> PlanFromConfig(const cost::Config& config, const PlanOverrides& o) {
  const std::string name = o.schedule.empty() ? config.pipeline.schedule : o.schedule;
  const int chunks = o.chunks > 0 ? o.chunks : o.schedule.empty() || o.schedule == config.pipeline.schedule
                                                   ? config.pipeline.chunks
                                                   : 0;
  const bool automatic = name == ir::kAutoSchedule;
  if (automatic && chunks > 1) {
    return Fail(fmt::format("{}: /pipeline/chunks: the auto schedule places 1 stage per device, not {}", config.source,
                            chunks));
  }
  // `auto` is partitioned as its shape, then ordered by the auto builder
  // with the costs this plan will be charged.
  auto built = o.shape && !automatic
                   ? Result<ir::Schedule>(*o.shape)
                   : ir::BuildShape(name, config.pipeline.stages, config.training.micro_batches, automatic ? 0 : chunks);
  if (!built) return Fail(fmt::format("{}: /pipeline: {}", config.source, built.error().message));
  if (built->num_stages > static_cast<int>(config.model.layers.size())) {
    return Fail(fmt::format("{}: the {} schedule has {} stages but the model only {} layers", config.source, name,
                            built->num_stages, config.model.layers.size()));
  }
  ir::Schedule& s = *built;
  s.replicas = config.Replicas();
  // The config is copied only when an override changes it.
  const ir::RecomputeMode recompute = o.recompute.value_or(config.pipeline.recompute);
  if ((recompute == ir::RecomputeMode::kSelective) != (config.pipeline.recompute == ir::RecomputeMode::kSelective)) {
    return Fail(fmt::format("{}: recompute 'selective' changes the model's costs (the stash, and the attention core "
                            "re-run in backward): set /pipeline/recompute in the config rather than overriding it",
                            config.source));
  }
  std::optional<cost::Config> named;
  // The memory partition cuts to the cap given as the auto schedule plans to it.
  const double cap = o.memory_cap_bytes > 0 ? o.memory_cap_bytes : config.pipeline.memory_cap;
  if (name != config.pipeline.schedule || chunks != config.pipeline.chunks || recompute != config.pipeline.recompute ||
      cap != config.pipeline.memory_cap) {
    named = config;
    named->pipeline.schedule = name;
    named->pipeline.chunks = chunks;
    named->pipeline.recompute = recompute;
    named->pipeline.memory_cap = cap;
  }
  const cost::Config& use = named ? *named : config;
  auto report = o.partition ? Result<PartitionReport>(*o.partition)
                            : PartitionForSchedule(use, s, cost::StagePeaks(s, recompute), o.calibration);
  if (!report) return tl::unexpected(report.error());
  if (automatic) {
    Plan skeleton{std::move(*report), std::move(s)};
    auto scheduled = cost::BuildAutoSchedule(use, skeleton, o.calibration, o.memory_cap_bytes);
    if (!scheduled) return tl::unexpected(scheduled.error());
    *report = std::move(skeleton.partition);
    s = std::move(*scheduled);
    s.replicas = config.Replicas();
    // The cut was sized on the shape's micro-batches in flight; the cells'
    // peaks are those of the order the builder chose (what simulate shows).
    std::vector<int> firsts;
    for (const auto& cell : report->cells) firsts.push_back(cell.first_layer);
    const auto peaks = cost::StagePeaks(s, recompute);
    const PartitionReport described = DescribePartition(use, firsts, &peaks, nullptr, o.calibration);
    for (size_t k = 0; k < report->cells.size(); ++k) {
      report->cells[k].peak_memory_bytes = described.cells[k].peak_memory_bytes;
    }
  }
  ir::PipelineOptions pipeline = Bytes(*report, cost::DtypeBytes(config.training.gradient_dtype));
  pipeline.recompute = recompute;
  pipeline.recompute_timing = config.pipeline.recompute_timing;
  pipeline.verify = o.verify;
  pipeline.what = fmt::format("the {} schedule built for {}", name, config.source);
  if (auto ok = ir::CompletePipeline(s, pipeline); !ok) return tl::unexpected(ok.error());
  return Plan{std::move(*report), std::move(s)};
}

namespace {

// The config as PartitionForSchedule cuts it for a schedule that is not one
// stage per device in order: a device per stage, each device's memory
// shared evenly by its stages; nothing for the config's own layout.
std::optional<cost::Config> Staged(const cost::Config& config, const ir::Schedule& schedule) {
  bool own = schedule.num_stages == config.pipeline.stages;
  for (int st = 0; own && st < schedule.num_stages; ++st) own = schedule.placement[st] == st;
  if (own) return std::nullopt;
  cost::Config staged = cost::CopyWithoutDevices(config);
  // Its GPUs (replicas, nodes, gradient groups) stay the run's.
  staged.gpu_layout = cost::Config::GpuLayout{config.PipelineDevices(), config.Gpus()};
  staged.pipeline.stages = schedule.num_stages;
  std::vector<int> held(schedule.num_devices, 0);
  for (int device : schedule.placement) ++held[device];
  // A device's memory, and the config's cap, shared evenly by its stages:
  // with as many stages on every device (every builder's), the cap shared
  // too, so that messages still name it; otherwise folded into each stage's
  // share of its device's memory.
  const double cap = config.pipeline.memory_cap;
  const bool even = std::all_of(held.begin(), held.end(), [&](int n) { return n == held.front(); });
  staged.pipeline.memory_cap = cap > 0 && even ? cap / held.front() : 0;
  for (int st = 0; st < schedule.num_stages; ++st) {
    cost::Device d = config.cluster.devices[schedule.placement[st]];
    if (cap > 0 && !even) d.memory_bytes = std::min(d.memory_bytes, cap);
    d.memory_bytes /= held[schedule.placement[st]];
    staged.cluster.devices.push_back(std::move(d));
  }
  if (staged.pipeline.partition == cost::PartitionAlgorithm::kManual &&
      static_cast<int>(staged.pipeline.first_layers.size()) != schedule.num_stages) {
    staged.pipeline.partition = cost::PartitionAlgorithm::kMinMax;
  }
  return staged;
}

// The two steps on the config Staged gives (nothing: the config's own).
Result<std::vector<int>> CutStaged(const cost::Config& config, const std::optional<cost::Config>& staged,
                                   const ir::Schedule& schedule, const std::vector<cost::StagePeak>& peaks,
                                   const cost::Calibration* calibration, bool explain = true) {
  if (!staged) return CutLayers(config, config.pipeline.partition, &peaks, nullptr, calibration, explain);
  // The staged config lists a device per stage; the nodes and links are the
  // schedule's devices'.
  return CutLayers(*staged, staged->pipeline.partition, &peaks, &schedule.placement, calibration, explain);
}

PartitionReport DescribeStaged(const cost::Config& config, const std::optional<cost::Config>& staged,
                               const ir::Schedule& schedule, const std::vector<cost::StagePeak>& peaks,
                               const std::vector<int>& first_layers, const cost::Calibration* calibration) {
  if (!staged) {
    PartitionReport report = DescribePartition(config, first_layers, &peaks, nullptr, calibration);
    report.algorithm = cost::PartitionAlgorithmName(config.pipeline.partition);
    return report;
  }
  PartitionReport report = DescribePartition(*staged, first_layers, &peaks, &schedule.placement, calibration);
  report.algorithm = cost::PartitionAlgorithmName(staged->pipeline.partition);
  for (auto& cell : report.cells) cell.device = schedule.placement[cell.device];
  return report;
}

}  // namespace

Result<std::vector<int>> CutForSchedule(const cost::Config& config, const ir::Schedule& schedule,
                                        const std::vector<cost::StagePeak>& peaks,
                                        const cost::Calibration* calibration, bool explain) {
  return CutStaged(config, Staged(config, schedule), schedule, peaks, calibration, explain);
}

PartitionReport DescribeForSchedule(const cost::Config& config, const ir::Schedule& schedule,
                                    const std::vector<cost::StagePeak>& peaks, const std::vector<int>& first_layers,
                                    const cost::Calibration* calibration) {
  return DescribeStaged(config, Staged(config, schedule), schedule, peaks, first_layers, calibration);
}

Result<PartitionReport> PartitionForSchedule(const cost::Config& config, const ir::Schedule& schedule,
                                             const std::vector<cost::StagePeak>& peaks,
                                             const cost::Calibration* calibration) {
  const auto staged = Staged(config, schedule);  // once: it copies the config
  auto firsts = CutStaged(config, staged, schedule, peaks, calibration);
  if (!firsts) return tl::unexpected(firsts.error());
  return DescribeStaged(config, staged, schedule, peaks, *firsts, calibration);
}

ScheduleGpus GpusOfSchedule(const cost::Config& config, const ir::Schedule& schedule) {
  const int replicas = std::max(1, schedule.replicas), per_device = config.GpusPerDevice();
  return {int64_t{schedule.num_devices} * replicas * per_device,
          fmt::format("{} replica{} of {} devices{}", replicas, replicas > 1 ? "s" : "", schedule.num_devices,
                      per_device > 1 ? fmt::format(" of {} GPUs", per_device) : "")};
}

Result<Plan> PlanForSchedule(const cost::Config& config, ir::Schedule schedule, std::string_view source,
                             const cost::Calibration* calibration) {
  // Every replica of every pipeline device is a group of t x c GPUs of the
  // cluster: a schedule that needs more than it has is refused.
  const ScheduleGpus used = GpusOfSchedule(config, schedule);
  if (used.gpus > config.cluster.NumDevices()) {
    return Fail(fmt::format("{}: /cluster/devices: the schedule ({}) runs {} ({} cluster devices), the cluster has {}",
                            config.source, source, used.runs, used.gpus, config.cluster.NumDevices()));
  }
  // A device's GPUs (and so its node and links) follow /pipeline/stages and
  // the replicas it leaves: a file of another device count is placed
  // only where every device is one GPU of one node.
  const bool placed = config.GpusPerDevice() > 1 || config.cluster.gpus_per_node < config.cluster.NumDevices();
  if (placed && schedule.num_devices != config.pipeline.stages) {
    return Fail(fmt::format("{}: /pipeline/stages: is {}, the schedule ({}) has {} devices: with tensor or context "
                            "parallelism or several nodes, a device's GPUs follow /pipeline/stages; set it to {}",
                            config.source, config.pipeline.stages, source, schedule.num_devices,
                            schedule.num_devices));
  }
  if (schedule.num_stages > static_cast<int>(config.model.layers.size())) {
    return Fail(fmt::format("{}: the schedule has {} stages but the model only {} layers", config.source,
                            schedule.num_stages, config.model.layers.size()));
  }
  if (schedule.num_micro_batches != config.training.micro_batches) {
    return Fail(fmt::format("{}: /training/microbatches: is {}, the schedule has {} micro-batches", config.source,
                            config.training.micro_batches, schedule.num_micro_batches));
  }
  // Verified before anything reads it: the partition indexes by its stages
  // and placement. Filling unknown bytes afterwards keeps it verified (a
  // send and its receive are both unknown, or the verifier compared them).
  if (auto ok = ir::VerifyOrFail(schedule, source); !ok) return tl::unexpected(ok.error());
  // A schedule from a file runs as written (nothing inserts R into it): its
  // own R ops are the recomputed pairs, whatever the config's mode says.
  const auto peaks = cost::StagePeaks(schedule, ir::RecomputeMode::kNone);
  auto report = PartitionForSchedule(config, schedule, peaks, calibration);
  if (!report) return tl::unexpected(report.error());
  Plan plan{std::move(*report), std::move(schedule)};
  FillBytes(plan.schedule, plan.partition, cost::DtypeBytes(config.training.gradient_dtype));
  return plan;
}

}  // namespace twinpipe::partition
