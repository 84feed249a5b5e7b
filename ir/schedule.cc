#include "ir/schedule.h"

namespace twinpipe::ir {

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
