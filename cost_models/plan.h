// What the simulator and the executors run: a verified schedule and the cell
// of the model each of its stages holds (a range of layers, on a device),
// with the partitioner's description of each cell. The partitioner
// (partition/) makes plans; simulate/ and execute/ take them and need
// nothing else from it.
//
//   const cost::Plan& plan = ...;
//   plan.schedule.programs[d]; plan.partition.cells[stage].first_layer;
#pragma once

#include <string>
#include <vector>

#include "ir/schedule.h"

namespace twinpipe::cost {

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

struct Plan {
  PartitionReport partition;
  ir::Schedule schedule;
};

}  // namespace twinpipe::cost
