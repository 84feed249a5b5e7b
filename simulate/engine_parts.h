// What the simulator's two engines share beyond the IR's dependencies
// (ir/dependencies.h) and the plan's costs (cost_models/plan_costs.h, where
// each op's duration and memory are): why a schedule cannot progress, the
// step's closing figures, a device's compute span.
//
//   if (stuck) return FailRuntime(DescribeBlocked(deps, stuck_ops, done));
//   int32_t last = FinishStep(result, devices);
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dependencies.h"
#include "ir/schedule.h"
#include "simulate/engine.h"
#include "ir/huge_page_allocator.h"

namespace twinpipe::simulate {

using ir::Dependencies;

// Why a schedule cannot progress: for each device's first unfinished op
// (`stuck[d]`, -1 when the device is done), what it still waits for:
// "device 1 at 1F0 waits for 1RECV_F0; ...".
std::string DescribeBlocked(const Dependencies& deps, const std::vector<int32_t>& stuck, const BigVector<char>& done);

// Sets the step time (the last end) and the bubble fraction of a finished
// simulation; returns the op that ends last (the highest id on ties).
int32_t FinishStep(SimResult& result, int32_t devices);

// Widens a device's compute span to [start, end].
inline void TouchSpan(DeviceStats& d, double start, double end) {
  if (d.first_start_s < 0 || start < d.first_start_s) d.first_start_s = start;
  d.last_end_s = std::max(d.last_end_s, end);
}

}  // namespace twinpipe::simulate
