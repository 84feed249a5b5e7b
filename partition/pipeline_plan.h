// From a config to a runnable plan: the partition of its model into one cell
// per stage and the verified schedule with recompute, comm (bytes from the
// cells' boundaries) and all-reduce (bytes from the cells' gradients). The
// one shared path from config to IR for `schedule`, `simulate` and `execute`.
//
//   Result<Plan> plan = PlanFromConfig(config);
//   plan->schedule; plan->partition.cells[0].last_layer;
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "cost_models/config.h"
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
  // Builds the `auto` schedule from a skeleton plan (zb-h1's compute-only
  // schedule, which fixes the partition) and the config in use: the op times
  // and memory come from the caller's cost model (simulate::AutoScheduler).
  std::function<Result<ir::Schedule>(const cost::Config&, const Plan&)> build_auto;
  // The compute-only schedule ir::BuildShape gives for this schedule, K, M
  // and chunks, already built (search keeps one per shape); null: build it.
  const ir::Schedule* shape = nullptr;
  // What PartitionForSchedule gives for this config and that shape, already
  // computed (search keeps one per cut); null: compute it.
  const PartitionReport* partition = nullptr;
};

Result<Plan> PlanFromConfig(const cost::Config& config, const PlanOverrides& overrides = {});

// The config's model cut into a built schedule's stages, given the most
// micro-batches each stage holds in flight (cost::InFlightPerStage). One
// stage per device in order: the config's own partition problem; otherwise
// cell k runs on device placement[k], the cluster is re-indexed so, and each
// device's memory is shared evenly by the stages it holds.
Result<PartitionReport> PartitionForSchedule(const cost::Config& config, const ir::Schedule& schedule,
                                             const std::vector<int>& in_flight);

// PartitionForSchedule in two steps, for callers that share cuts: the first
// layer of each cell, then the cells' report.
Result<std::vector<int>> CutForSchedule(const cost::Config& config, const ir::Schedule& schedule,
                                        const std::vector<int>& in_flight);
PartitionReport DescribeForSchedule(const cost::Config& config, const ir::Schedule& schedule,
                                    const std::vector<int>& in_flight, const std::vector<int>& first_layers);

// For a schedule read from a file: partitions the config's model into the
// schedule's stages (placing stage s on cluster device placement[s]) and
// fills every comm and all-reduce op whose bytes are unknown (0). `source`
// names the schedule in messages (its file).
Result<Plan> PlanForSchedule(const cost::Config& config, ir::Schedule schedule,
                             std::string_view source = "the schedule");

}  // namespace twinpipe::partition
