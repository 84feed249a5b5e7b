// What the simulator's two engines share beyond the IR's dependencies
// (ir/dependencies.h): the memory each op takes or gives back, why a
// schedule cannot progress, the step's closing figures, each op's duration.
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


// Memory an op takes when it starts and gives back when it ends (bytes on
// its device): F materialises the cell's activations and, when its
// (stage, micro-batch) is recomputed, keeps only the boundary input at its
// end; R rebuilds them; the last backward (B, or W after I) frees them.
double MemoryAtStart(const SimCosts& costs, const ir::Op& op);
double MemoryAtEnd(const Dependencies& deps, const SimCosts& costs, const ir::Op& op);
inline double MemoryAtStart(const Dependencies& deps, const SimCosts& costs, int32_t id) {
  return MemoryAtStart(costs, deps.op(id));
}
inline double MemoryAtEnd(const Dependencies& deps, const SimCosts& costs, int32_t id) {
  return MemoryAtEnd(deps, costs, deps.op(id));
}

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

// Seconds of a compute, STEP or ALLREDUCE op. (A transfer: cost::TransferTime.)
double OpDuration(const ir::Op& op, const SimCosts& costs, int32_t replicas);

}  // namespace twinpipe::simulate
