#include "ir/schedule.h"

namespace twinpipe::ir {

size_t PairPartner(const std::vector<Op>& program, size_t position) {
  size_t j = position + 1;
  while (j < program.size() && (IsComm(program[j].kind) || program[j].kind == OpKind::kRecompute)) ++j;
  return j;
}

void Renumber(Schedule& schedule) {
  int32_t id = 0;
  for (int32_t d = 0; d < static_cast<int32_t>(schedule.programs.size()); ++d) {
    for (Op& op : schedule.programs[d]) {
      op.id = id++;
      op.device = d;
    }
  }
}

}  // namespace twinpipe::ir
