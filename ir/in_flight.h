// How many micro-batches each stage holds in flight, counted once for both of
// the simulator's engines and the memory model: a micro-batch is in flight on
// a stage from the end of its forward (F) until its activations are freed by
// the end of its last backward (B, or W after I). Ops are fed as they end;
// per stage that is its device's program order, so a schedule's programs
// walked op by op give the same counts as a simulated step. Ops of other
// kinds, and stages outside 0..stages-1 (an unverified schedule's), change
// nothing.
//
//   InFlightCounter in_flight(schedule.num_stages);
//   for (const auto& program : schedule.programs) for (const Op& op : program) in_flight.Ended(op);
//   in_flight.Peak()[stage];   // the most micro-batches that stage held at once
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "ir/op.h"

namespace twinpipe::ir {

class InFlightCounter {
 public:
  explicit InFlightCounter(int32_t stages) : now_(stages, 0), peak_(stages, 0) {}

  // An op of `kind` on `stage` has ended.
  void Ended(OpKind kind, int32_t stage) {
    const bool forward = kind == OpKind::kForward;
    if (!forward && kind != OpKind::kBackward && kind != OpKind::kBackwardWeight) return;
    if (stage < 0 || stage >= static_cast<int32_t>(now_.size())) return;
    if (forward) {
      peak_[stage] = std::max(peak_[stage], ++now_[stage]);
    } else {
      --now_[stage];
    }
  }
  void Ended(const Op& op) { Ended(op.kind, op.stage); }

  // Per stage: micro-batches in flight now, and the most at once so far.
  const std::vector<int32_t>& Now() const { return now_; }
  const std::vector<int32_t>& Peak() const { return peak_; }
  std::vector<int32_t> TakePeak() { return std::move(peak_); }

 private:
  std::vector<int32_t> now_, peak_;
};

}  // namespace twinpipe::ir
