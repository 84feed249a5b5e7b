#include "simulate/engine_parts.h"

#include <algorithm>

#include <fmt/format.h>

namespace twinpipe::simulate {

std::string DescribeBlocked(const Dependencies& deps, const std::vector<int32_t>& stuck, const BigVector<char>& done) {
  std::vector<std::string> lines;
  for (size_t d = 0; d < stuck.size(); ++d) {
    if (stuck[d] < 0) continue;
    const ir::Op& op = deps.op(stuck[d]);
    std::vector<std::string> waits;
    deps.ForEach(stuck[d], [&](int32_t dep) {
      if (!done[dep]) waits.push_back(ir::OpToken(deps.op(dep)));
    });
    if (ir::IsSend(op.kind) && waits.empty()) waits.push_back(fmt::format("a receive on device {}", op.peer));
    lines.push_back(fmt::format("device {} at {} waits for {}", d, ir::OpToken(op),
                                waits.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(waits, ", "))));
  }
  return fmt::format("{}", fmt::join(lines, "; "));
}

int32_t FinishStep(SimResult& r, int32_t devices) {
  double last = 0;
  int32_t last_op = -1;
  for (size_t id = 0; id < r.end_s.size(); ++id) {
    if (r.end_s[id] >= last) {
      last = r.end_s[id];
      last_op = static_cast<int32_t>(id);
    }
  }
  r.step_time_s = last;
  double busy = 0;
  for (const auto& d : r.devices) busy += d.busy_s;
  r.bubble_fraction = last > 0 ? 1 - busy / (devices * last) : 0;
  double span = 0;
  for (const auto& d : r.devices) span = std::max(span, d.last_end_s - d.first_start_s);
  r.overlapped_step_s = span;
  r.overlapped_bubble_fraction = span > 0 ? 1 - busy / (devices * span) : 0;
  return last_op;
}

}  // namespace twinpipe::simulate
