// The dependencies a schedule implies (DESIGN.md section 4), once, for
// every consumer: the simulator's two engines wait on them, the executor
// reads which (stage, micro-batch) pairs are recomputed.
//
//   Dependencies deps(schedule);              // schedule ids must be canonical
//   deps.ForEach(id, [](int32_t dep) { ... });
//   deps.Find(OpKind::kRecvF, stage, micro_batch);
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ir/huge_page_allocator.h"
#include "ir/op_table.h"
#include "ir/schedule.h"

namespace twinpipe::ir {

class Dependencies {
 public:
  // Reads the schedule's ops where they are: it must outlive this.
  explicit Dependencies(const Schedule& s);

  // The op of an id on a known device, at once; on any device, by a search
  // over the devices (off the engines' hot paths).
  const Op& OpOn(int32_t device, int32_t id) const { return s_->programs[device][id - first_[device]]; }
  const Op& op(int32_t id) const {
    const auto device = std::upper_bound(first_.begin(), first_.end(), id) - first_.begin() - 1;
    return OpOn(static_cast<int32_t>(device), id);
  }
  int64_t size() const { return first_.back(); }

  // The op of (kind, stage, micro-batch), or -1. Kinds F..RECV_B only.
  int32_t Find(OpKind kind, int32_t stage, int32_t micro_batch) const { return where_.at(kind, stage, micro_batch); }
  bool Recomputed(int32_t stage, int32_t micro_batch) const {
    return Find(OpKind::kRecompute, stage, micro_batch) >= 0;
  }
  // A compute op's input receive (RECV_F for F, RECV_B for B and I), or -1.
  int32_t InputRecv(int32_t id) const { return InputRecv(op(id)); }
  int32_t InputRecv(const Op& op) const;

  // Calls visit(dep) for every op that `id` waits for: its input (the receive,
  // or the same-device op that produced it), F before R (and the gradient's
  // receive when it precedes R), F and R before the backward, I
  // before W, the producer before a send, the stage's last backward before
  // ALLREDUCE, every all-reduce of the device before STEP. Engine order
  // (program order, channel FIFO) is the engines' business.
  template <typename Visit>
  void ForEach(int32_t id, Visit&& visit) const {
    ForEach(op(id), visit);
  }
  // The same for an op of the schedule at hand (spares the lookup by id).
  template <typename Visit>
  void ForEach(const Op& op, Visit&& visit) const {
    const int32_t st = op.stage, m = op.micro_batch;
    auto dep = [&](int32_t d) {
      if (d >= 0) visit(d);
    };
    switch (op.kind) {
      case OpKind::kForward: {
        const int32_t recv = Find(OpKind::kRecvF, st, m);
        dep(recv);
        if (recv < 0 && st > 0 && placement_[st - 1] == op.device) dep(Find(OpKind::kForward, st - 1, m));
        break;
      }
      case OpKind::kRecompute: {
        dep(Find(OpKind::kForward, st, m));
        // Placed after its gradient's receive (RecomputeTiming::kInBackward),
        // a recompute waits for the gradient, as the backward call that runs
        // it does; ids follow program order on the device.
        const int32_t recv = Find(OpKind::kRecvB, st, m);
        if (recv >= 0 && recv < op.id) dep(recv);
        break;
      }
      case OpKind::kBackward:
      case OpKind::kBackwardInput: {
        dep(Find(OpKind::kForward, st, m));
        dep(Find(OpKind::kRecompute, st, m));
        const int32_t recv = Find(OpKind::kRecvB, st, m);
        dep(recv);
        if (recv < 0 && st + 1 < k_ && placement_[st + 1] == op.device) dep(BackwardOf(st + 1, m));
        break;
      }
      case OpKind::kBackwardWeight: dep(Find(OpKind::kBackwardInput, st, m)); break;
      case OpKind::kSendF: dep(Find(OpKind::kForward, st, m)); break;
      case OpKind::kSendB: dep(BackwardOf(st, m)); break;
      case OpKind::kAllReduce: dep(last_backward_[st]); break;
      case OpKind::kStep:
        for (int32_t ar : all_reduces_[op.device]) dep(ar);
        break;
      default: break;
    }
  }

 private:
  int32_t BackwardOf(int32_t stage, int32_t micro_batch) const {
    const int32_t b = Find(OpKind::kBackward, stage, micro_batch);
    return b >= 0 ? b : Find(OpKind::kBackwardInput, stage, micro_batch);
  }

  int32_t k_;
  std::vector<int32_t> placement_;
  const Schedule* s_;
  std::vector<int32_t> first_;  // per device, its first op's id; then the op count
  // By (kind, stage, micro-batch): an op's dependencies, mostly its own
  // stage and micro-batch's other kinds, share a cache line.
  OpTable<HugePageAllocator> where_;
  std::vector<int32_t> last_backward_;             // per stage
  std::vector<std::vector<int32_t>> all_reduces_;  // per device
};

}  // namespace twinpipe::ir
