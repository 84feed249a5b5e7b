// From a config to a runnable plan: the partition of its model into one cell
// per stage and the verified schedule with recompute, comm (bytes from the
// cells' boundaries) and all-reduce (bytes from the cells' gradients). The
// one shared path from config to IR for `schedule`, `simulate` and `execute`.
//
//   Result<Plan> plan = PlanFromConfig(config);
//   plan->schedule; plan->partition.cells[0].last_layer;
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "cost_models/calibration.h"
#include "cost_models/config.h"
#include "cost_models/memory_model.h"
#include "ir/schedule.h"
#include "partition/plan.h"

namespace twinpipe::partition {

using cost::Plan;  // cost_models/plan.h: what simulate and execute take

// Overrides of the config's pipeline section (empty: the config's own).
struct PlanOverrides {
  std::string schedule;
  std::optional<ir::RecomputeMode> recompute;
  int chunks = 0;  // 0: the config's pipeline.chunks
  // Verify the built schedule (a builder bug is a runtime error). `search`
  // skips it: every builder's output is verified over a grid by the tests.
  bool verify = true;
  // Times the cells are balanced with and the `auto` schedule is planned
  // with (as cost::CostsFromPlan charges them with it); null: the catalogue's.
  const cost::Calibration* calibration = nullptr;
  // The memory the `auto` schedule plans to and the memory partition cuts
  // to (0: the config's /pipeline/memory_cap, or the devices'); see
  // cost::AutoMemoryCap.
  double memory_cap_bytes = 0;
  // The compute-only schedule ir::BuildShape gives for this schedule, K, M
  // and chunks, already built (search keeps one per shape); null: build it.
  const ir::Schedule* shape = nullptr;
  // What PartitionForSchedule gives for this config and that shape, already
  // computed (search keeps one per cut); null: compute it.
  const PartitionReport* partition = nullptr;
};

Result<Plan> PlanFromConfig(const cost::Config& config, const PlanOverrides& overrides = {});

// The config's model cut into a built schedule's stages, given each stage's
// activation peak under it (cost::StagePeaks). One
// stage per device in order: the config's own partition problem; otherwise
// cell k runs on device placement[k], the cluster is re-indexed so, and each
// device's memory is shared evenly by the stages it holds.
Result<PartitionReport> PartitionForSchedule(const cost::Config& config, const ir::Schedule& schedule,
                                             const std::vector<cost::StagePeak>& peaks,
                                             const cost::Calibration* calibration = nullptr);

// PartitionForSchedule in two steps, for callers that share cuts: the first
// layer of each cell, then the cells' report. `explain` false: where nothing
// fits, a short message, without the search for why (CutLayers).
Result<std::vector<int>> CutForSchedule(const cost::Config& config, const ir::Schedule& schedule,
                                        const std::vector<cost::StagePeak>& peaks,
                                        const cost::Calibration* calibration = nullptr, bool explain = true);
PartitionReport DescribeForSchedule(const cost::Config& config, const ir::Schedule& schedule,
                                    const std::vector<cost::StagePeak>& peaks, const std::vector<int>& first_layers,
                                    const cost::Calibration* calibration = nullptr);

// The cluster GPUs a schedule's replicas take (its devices x replicas x the
// t x c GPUs of each), and those words ("2 replicas of 4 devices of 8 GPUs").
struct ScheduleGpus {
  int64_t gpus = 0;
  std::string runs;
};
ScheduleGpus GpusOfSchedule(const cost::Config& config, const ir::Schedule& schedule);

// For a schedule read from a file: partitions the config's model into the
// schedule's stages (placing stage s on cluster device placement[s]) and
// fills every comm and all-reduce op whose bytes are unknown (0). `source`
// names the schedule in messages (its file); `calibration` times the cells
// as for PlanFromConfig.
Result<Plan> PlanForSchedule(const cost::Config& config, ir::Schedule schedule,
                             std::string_view source = "the schedule",
                             const cost::Calibration* calibration = nullptr);

}  // namespace twinpipe::partition
