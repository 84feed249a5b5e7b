// The dependencies the IR implies (DESIGN.md section 4), and the memory each
// op takes or gives back: shared by the simulator's two engines.
//
//   Dependencies deps(schedule);              // schedule ids must be canonical
//   deps.ForEach(id, [](int32_t dep) { ... });
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/schedule.h"
#include "simulate/engine.h"
#include "simulate/huge_page_allocator.h"

namespace twinpipe::simulate {

class Dependencies {
 public:
  explicit Dependencies(const ir::Schedule& s);

  const ir::Op& op(int32_t id) const { return *ops_[id]; }
  int64_t size() const { return static_cast<int64_t>(ops_.size()); }

  // The op of (kind, stage, micro-batch), or -1. Kinds F..RECV_B only.
  int32_t Find(ir::OpKind kind, int32_t stage, int32_t micro_batch) const {
    return where_[(static_cast<size_t>(stage) * m_ + micro_batch) * kKinds + static_cast<size_t>(kind)];
  }
  bool Recomputed(int32_t stage, int32_t micro_batch) const {
    return Find(ir::OpKind::kRecompute, stage, micro_batch) >= 0;
  }
  // A compute op's input receive (RECV_F for F, RECV_B for B and I), or -1.
  int32_t InputRecv(int32_t id) const;

  // Calls visit(dep) for every op that `id` waits for: its input (the receive,
  // or the same-device op that produced it), F and R before the backward, I
  // before W, the producer before a send, the stage's last backward before
  // ALLREDUCE, every all-reduce of the device before STEP. Engine order
  // (program order, channel FIFO) is the engines' business.
  template <typename Visit>
  void ForEach(int32_t id, Visit&& visit) const {
    using ir::OpKind;
    const ir::Op& op = *ops_[id];
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
      case OpKind::kRecompute: dep(Find(OpKind::kForward, st, m)); break;
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
    const int32_t b = Find(ir::OpKind::kBackward, stage, micro_batch);
    return b >= 0 ? b : Find(ir::OpKind::kBackwardInput, stage, micro_batch);
  }

  // F, B, I, W, R, SEND_F, RECV_F, SEND_B, RECV_B: the kinds Find knows,
  // stored together per (stage, micro-batch) so that an op's dependencies
  // (mostly its own stage and micro-batch's other kinds) share a cache line.
  static constexpr size_t kKinds = 9;
  int32_t k_, m_;
  std::vector<int32_t> placement_;
  BigVector<const ir::Op*> ops_;
  BigVector<int32_t> where_;
  std::vector<int32_t> last_backward_;             // per stage
  std::vector<std::vector<int32_t>> all_reduces_;  // per device
};

// Memory an op takes when it starts and gives back when it ends (bytes on
// its device): F materialises the cell's activations and, when its
// (stage, micro-batch) is recomputed, keeps only the boundary input at its
// end; R rebuilds them; the last backward (B, or W after I) frees them.
double MemoryAtStart(const Dependencies& deps, const SimCosts& costs, int32_t id);
double MemoryAtEnd(const Dependencies& deps, const SimCosts& costs, int32_t id);

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
