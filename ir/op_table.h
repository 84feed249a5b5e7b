// The lookup of an op by (kind, stage, micro-batch), for the kinds that
// belong to one (stage, micro-batch): F, B, I, W, R, SEND_F, RECV_F, SEND_B,
// RECV_B. One record of nine slots per pair keeps a pair's ops on one cache
// line. A slot holds whatever its user indexes by (an op id, or a position
// in the stage's device program), -1 when empty.
//
//   OpTable<> t(stages, micro_batches);
//   t.slot(OpKind::kForward, st, m) = id;   ...   t.at(OpKind::kRecvF, st, m)
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "ir/op.h"

namespace twinpipe::ir {

constexpr int kPairKinds = 9;
static_assert(static_cast<int>(OpKind::kRecvB) + 1 == kPairKinds);

// Whether a kind has a slot (the rest: ALLREDUCE, STEP).
constexpr bool IsPairKind(OpKind kind) { return static_cast<int>(kind) < kPairKinds; }

template <template <typename> class Allocator = std::allocator>
class OpTable {
 public:
  OpTable() = default;
  OpTable(int32_t stages, int32_t micro_batches) : m_(micro_batches) {
    Slots empty;
    empty.fill(-1);
    slots_.assign(static_cast<size_t>(stages) * static_cast<size_t>(micro_batches), empty);
  }
  int32_t& slot(OpKind kind, int32_t stage, int32_t micro_batch) {
    return slots_[static_cast<size_t>(stage) * m_ + micro_batch][static_cast<size_t>(kind)];
  }
  int32_t at(OpKind kind, int32_t stage, int32_t micro_batch) const {
    return slots_[static_cast<size_t>(stage) * m_ + micro_batch][static_cast<size_t>(kind)];
  }

 private:
  using Slots = std::array<int32_t, kPairKinds>;
  size_t m_ = 0;
  std::vector<Slots, Allocator<Slots>> slots_;
};

}  // namespace twinpipe::ir
