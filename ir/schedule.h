// The schedule IR: K stages, M micro-batches, a stage-to-device placement and,
// for every device, an ordered program of ops (program order = issue order on
// that device's stream). Plain data; builders, passes, the verifier and the
// printers are free functions in their own files.
//
//   Schedule s = BuildGpipe(/*stages=*/4, /*micro_batches=*/8);
//   s.programs[0].front()  // 0F0
#pragma once

#include <cstdint>
#include <vector>

#include "ir/op.h"

namespace twinpipe::ir {

struct Schedule {
  int32_t num_stages = 0;          // K: global stages 0..K-1
  int32_t num_micro_batches = 0;   // M
  int32_t num_devices = 0;         // pipeline devices of one replica
  int32_t replicas = 1;            // data-parallel copies of the whole pipeline
  std::vector<int32_t> placement;  // placement[stage] = device
  std::vector<std::vector<Op>> programs;  // programs[device] = ops in issue order

  bool operator==(const Schedule&) const = default;

  int64_t NumOps() const {
    int64_t n = 0;
    for (const auto& p : programs) n += static_cast<int64_t>(p.size());
    return n;
  }
};

// Where the op a paired F (Op::paired) at `position` of a program overlaps
// with should be: the first op after it that is neither a comm op nor a
// recompute (the pair's partner when it is a B or I); program.size() when
// the program ends first. The one rule the verifier, the passes, the torch
// CSV writer and the simulator's pair timing share.
size_t PairPartner(const std::vector<Op>& program, size_t position);

// Gives every op its canonical id (device-major, then program position) and
// sets op.device from the program that holds it. Every pass ends with it, so
// ids are deterministic and survive the text round trip.
void Renumber(Schedule& schedule);

}  // namespace twinpipe::ir
