// From a config to a partition report: builds the partitioning problem from
// the cost models (layer times per device kind, transfer time per cut, memory
// per cell for the configured schedule), runs the chosen algorithm and
// describes each cell.
//
//   Result<PartitionReport> r = PlanPartition(config, cost::PartitionAlgorithm::kMinMax);
//   r->cells[0].last_layer; r->bottleneck_s;
#pragma once

#include <string>
#include <vector>

#include "cost_models/config.h"
#include "cost_models/plan.h"
#include "ir/result.h"
#include "partition/partitioner.h"

namespace twinpipe::partition {

// The report types live with the plan that simulate and execute take.
using cost::CellReport;
using cost::PartitionReport;

// The partitioning problem of a config (one cell per stage of the first
// pipeline replica).
// `in_flight` (per stage, from a schedule already built) spares building the
// configured schedule again to count them. `placement` (per stage, its
// pipeline device; default stage k on device k) decides which link each
// cut's transfer takes: none between stages on one device, the inter-node
// link between devices on two nodes (Config::NodeOf).
PartitionProblem BuildProblem(const cost::Config& config, const std::vector<int>* in_flight = nullptr,
                              const std::vector<int>* placement = nullptr);

// Runs gpipe | minmax | memory | manual. Bad manual indices are bad input
// (exit 2); a model that does not fit in memory is a runtime failure (exit 1).
Result<PartitionReport> PlanPartition(const cost::Config& config, cost::PartitionAlgorithm algorithm,
                                      const std::vector<int>* in_flight = nullptr,
                                      const std::vector<int>* placement = nullptr);

// PlanPartition's cut alone: the first layer of each cell.
Result<std::vector<int>> CutLayers(const cost::Config& config, cost::PartitionAlgorithm algorithm,
                                   const std::vector<int>* in_flight = nullptr,
                                   const std::vector<int>* placement = nullptr);

// Describes the cells of a given partition.
PartitionReport DescribePartition(const cost::Config& config, const std::vector<int>& first_layers,
                                  const std::vector<int>* in_flight = nullptr,
                                  const std::vector<int>* placement = nullptr);

}  // namespace twinpipe::partition
