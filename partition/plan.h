// From a config to a partition report: builds the partitioning problem from
// the cost models (layer times per device kind, transfer time per cut, memory
// per cell for the configured schedule), runs the chosen algorithm and
// describes each cell.
//
//   Result<PartitionReport> r = PlanPartition(config, "minmax");
//   r->cells[0].last_layer; r->bottleneck_s;
#pragma once

#include <string>
#include <vector>

#include "cost_models/config.h"
#include "ir/result.h"
#include "partition/partitioner.h"

namespace twinpipe::partition {

struct CellReport {
  int first_layer = 0;        // 0-based, inclusive
  int last_layer = 0;         // 0-based, inclusive
  int device = 0;
  double cost = 0;            // what was balanced: the user's costs, or time_s
  double time_s = 0;          // per micro-batch: F + B (+ R) and the outgoing transfers
  double params = 0;
  double peak_memory_bytes = 0;
  double boundary_bytes = 0;  // activation bytes per micro-batch to the next cell
};

struct PartitionReport {
  std::string algorithm;
  bool user_costs = false;    // every layer had a cost (c_i) and those were balanced
  std::vector<CellReport> cells;
  double bottleneck_s = 0;    // slowest cell's time_s
  double imbalance = 0;       // slowest / mean cell time
};

// The partitioning problem of a config (one cell per stage of the first
// pipeline replica).
// `in_flight` (per stage, from a schedule already built) spares building the
// configured schedule again to count them.
PartitionProblem BuildProblem(const cost::Config& config, const std::vector<int>* in_flight = nullptr);

// Runs gpipe | minmax | memory | manual. Bad manual indices are bad input
// (exit 2); a model that does not fit in memory is a runtime failure (exit 1).
Result<PartitionReport> PlanPartition(const cost::Config& config, const std::string& algorithm,
                                      const std::vector<int>* in_flight = nullptr);

// Describes the cells of a given partition.
PartitionReport DescribePartition(const cost::Config& config, const std::vector<int>& first_layers,
                                  const std::vector<int>* in_flight = nullptr);

}  // namespace twinpipe::partition
