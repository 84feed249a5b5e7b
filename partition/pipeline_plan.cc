#include "partition/pipeline_plan.h"

#include <fmt/format.h>

#include "ir/builders.h"
#include "ir/passes.h"
#include "ir/verifier.h"

namespace twinpipe::partition {
namespace {

// Per stage boundary: activation bytes per micro-batch; per stage: gradient bytes.
void FillBytes(ir::Schedule& s, const PartitionReport& r, int dtype_bytes) {
  for (auto& program : s.programs) {
    for (ir::Op& op : program) {
      if (op.bytes != 0) continue;
      if (op.kind == ir::OpKind::kSendF || op.kind == ir::OpKind::kRecvF) {
        const int boundary = op.kind == ir::OpKind::kSendF ? op.stage : op.stage - 1;
        op.bytes = static_cast<int64_t>(r.cells[boundary].boundary_bytes);
      } else if (op.kind == ir::OpKind::kSendB || op.kind == ir::OpKind::kRecvB) {
        const int boundary = op.kind == ir::OpKind::kSendB ? op.stage - 1 : op.stage;
        op.bytes = static_cast<int64_t>(r.cells[boundary].boundary_bytes);
      } else if (op.kind == ir::OpKind::kAllReduce) {
        op.bytes = static_cast<int64_t>(r.cells[op.stage].params * dtype_bytes);
      }
    }
  }
}

Result<void> Check(const ir::Schedule& s, const std::string& what) {
  auto diagnostics = ir::Verify(s);
  if (diagnostics.empty()) return {};
  std::string all;
  for (size_t i = 0; i < std::min<size_t>(diagnostics.size(), 20); ++i) {
    all += "\n  " + ir::FormatDiagnostic(s, diagnostics[i]);
  }
  return Fail(fmt::format("{} does not verify:{}", what, all));
}

}  // namespace

Result<Plan> PlanFromConfig(const cost::Config& config, const PlanOverrides& o) {
  auto report = PlanPartition(config, config.pipeline.partition);
  if (!report) return tl::unexpected(report.error());
  const std::string name = o.schedule.empty() ? config.pipeline.schedule : o.schedule;
  auto built = ir::BuildByName(name, config.pipeline.stages, config.training.micro_batches);
  if (!built) return tl::unexpected(built.error());
  Plan plan{std::move(*report), std::move(*built)};
  ir::Schedule& s = plan.schedule;
  s.replicas = config.Replicas();
  ir::InsertRecompute(s, o.recompute.value_or(config.pipeline.recompute));
  if (auto ok = ir::InsertComm(s, {}); !ok) return tl::unexpected(ok.error());
  ir::InsertAllReduce(s, {});
  FillBytes(s, plan.partition, cost::DtypeBytes(config.model.dtype));
  if (auto ok = Check(s, fmt::format("the {} schedule built for {}", name, config.source)); !ok) {
    return FailRuntime(ok.error().message);  // a builder bug, not the user's input
  }
  return plan;
}

Result<Plan> PlanForSchedule(const cost::Config& config, ir::Schedule schedule) {
  if (schedule.num_devices > config.cluster.NumDevices()) {
    return Fail(fmt::format("{}: /cluster/devices: the schedule uses {} devices, the cluster has {}", config.source,
                            schedule.num_devices, config.cluster.NumDevices()));
  }
  if (schedule.num_stages > static_cast<int>(config.model.layers.size())) {
    return Fail(fmt::format("{}: the schedule has {} stages but the model only {} layers", config.source,
                            schedule.num_stages, config.model.layers.size()));
  }
  if (schedule.num_micro_batches != config.training.micro_batches) {
    return Fail(fmt::format("{}: /training/microbatches: is {}, the schedule has {} micro-batches", config.source,
                            config.training.micro_batches, schedule.num_micro_batches));
  }
  // The config's cluster, re-indexed so that cell k runs on stage k's device.
  cost::Config staged = config;
  staged.pipeline.stages = schedule.num_stages;
  staged.cluster.devices.clear();
  for (int st = 0; st < schedule.num_stages; ++st) {
    staged.cluster.devices.push_back(config.cluster.devices[schedule.placement[st]]);
  }
  if (staged.pipeline.partition == "manual" &&
      static_cast<int>(staged.pipeline.first_layers.size()) != schedule.num_stages) {
    staged.pipeline.partition = "minmax";
  }
  auto report = PlanPartition(staged, staged.pipeline.partition);
  if (!report) return tl::unexpected(report.error());
  for (auto& cell : report->cells) cell.device = schedule.placement[cell.device];
  Plan plan{std::move(*report), std::move(schedule)};
  FillBytes(plan.schedule, plan.partition, cost::DtypeBytes(config.model.dtype));
  if (auto ok = Check(plan.schedule, "the schedule"); !ok) return tl::unexpected(ok.error());
  return plan;
}

}  // namespace twinpipe::partition
