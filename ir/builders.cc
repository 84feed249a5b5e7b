#include "ir/builders.h"

#include <algorithm>

#include <fmt/format.h>

namespace twinpipe::ir {
namespace {

// An empty schedule of K stages on K devices, stage s on device s.
Schedule OneStagePerDevice(int32_t stages, int32_t micro_batches) {
  Schedule s;
  s.num_stages = stages;
  s.num_micro_batches = micro_batches;
  s.num_devices = stages;
  s.placement.resize(stages);
  s.programs.resize(stages);
  for (int32_t i = 0; i < stages; ++i) s.placement[i] = i;
  return s;
}

Op Compute(OpKind kind, int32_t stage, int32_t micro_batch) {
  return Op{.kind = kind, .device = stage, .stage = stage, .micro_batch = micro_batch};
}

void Finish(Schedule& s) {
  for (int32_t d = 0; d < s.num_devices; ++d) {
    s.programs[d].push_back(Op{.kind = OpKind::kStep, .device = d});
  }
  Renumber(s);
}

}  // namespace

Schedule BuildNaive(int32_t stages, int32_t micro_batches) {
  Schedule s = OneStagePerDevice(stages, micro_batches);
  for (int32_t st = 0; st < stages; ++st) {
    auto& program = s.programs[st];
    program.reserve(2 * micro_batches + 1);
    for (int32_t m = 0; m < micro_batches; ++m) {
      program.push_back(Compute(OpKind::kForward, st, m));
      program.push_back(Compute(OpKind::kBackward, st, m));
    }
  }
  Finish(s);
  return s;
}

Schedule BuildGpipe(int32_t stages, int32_t micro_batches) {
  Schedule s = OneStagePerDevice(stages, micro_batches);
  for (int32_t st = 0; st < stages; ++st) {
    auto& program = s.programs[st];
    program.reserve(2 * micro_batches + 1);
    for (int32_t m = 0; m < micro_batches; ++m) program.push_back(Compute(OpKind::kForward, st, m));
    for (int32_t m = micro_batches - 1; m >= 0; --m) {
      program.push_back(Compute(OpKind::kBackward, st, m));
    }
  }
  Finish(s);
  return s;
}

Schedule Build1F1B(int32_t stages, int32_t micro_batches) {
  Schedule s = OneStagePerDevice(stages, micro_batches);
  for (int32_t st = 0; st < stages; ++st) {
    auto& program = s.programs[st];
    program.reserve(2 * micro_batches + 1);
    const int32_t warmup = std::min(stages - st - 1, micro_batches);
    int32_t next_forward = 0;
    int32_t next_backward = 0;
    for (; next_forward < warmup; ++next_forward) {
      program.push_back(Compute(OpKind::kForward, st, next_forward));
    }
    while (next_forward < micro_batches) {
      program.push_back(Compute(OpKind::kForward, st, next_forward++));
      program.push_back(Compute(OpKind::kBackward, st, next_backward++));
    }
    while (next_backward < micro_batches) {
      program.push_back(Compute(OpKind::kBackward, st, next_backward++));
    }
  }
  Finish(s);
  return s;
}

const std::vector<std::string>& BuilderNames() {
  static const std::vector<std::string> names = {"naive", "gpipe", "1f1b"};
  return names;
}

Result<Schedule> BuildByName(std::string_view name, int32_t stages, int32_t micro_batches) {
  if (stages < 1) return Fail(fmt::format("stages must be at least 1, got {}", stages));
  if (micro_batches < 1) {
    return Fail(fmt::format("micro-batches must be at least 1, got {}", micro_batches));
  }
  if (name == "naive") return BuildNaive(stages, micro_batches);
  if (name == "gpipe") return BuildGpipe(stages, micro_batches);
  if (name == "1f1b") return Build1F1B(stages, micro_batches);
  return Fail(fmt::format("unknown schedule '{}': expected one of {}", name,
                          fmt::join(BuilderNames(), ", ")));
}

}  // namespace twinpipe::ir
