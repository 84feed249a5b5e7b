#include "ir/dependencies.h"

namespace twinpipe::ir {

Dependencies::Dependencies(const Schedule& s)
    : k_(s.num_stages), placement_(s.placement), s_(&s), where_(s.num_stages, s.num_micro_batches),
      last_backward_(s.num_stages, -1), all_reduces_(s.num_devices) {
  int32_t next = 0;
  for (const auto& program : s.programs) {
    first_.push_back(next);
    next += static_cast<int32_t>(program.size());
    for (const Op& op : program) {
      const int32_t id = op.id;
      if (IsPairKind(op.kind)) where_.slot(op.kind, op.stage, op.micro_batch) = id;
      if (op.kind == OpKind::kBackward || op.kind == OpKind::kBackwardInput || op.kind == OpKind::kBackwardWeight) {
        last_backward_[op.stage] = id;  // ids follow program order on a device
      }
      if (op.kind == OpKind::kAllReduce) all_reduces_[op.device].push_back(id);
    }
  }
  first_.push_back(next);
}

int32_t Dependencies::InputRecv(const Op& op) const {
  if (op.kind == OpKind::kForward) return Find(OpKind::kRecvF, op.stage, op.micro_batch);
  if (op.kind == OpKind::kBackward || op.kind == OpKind::kBackwardInput) {
    return Find(OpKind::kRecvB, op.stage, op.micro_batch);
  }
  return -1;
}

}  // namespace twinpipe::ir
