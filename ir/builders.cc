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

// 1F1B and ZB-H1 share their order: stage s runs min(K-s-1, M) warm-up
// forwards, then alternates a forward and a backward, then drains the
// backwards. With `split` each backward is an I, and a W follows it once the
// stage has deferred s of them; the deferred W's come last.
Schedule OneForwardOneBackward(int32_t stages, int32_t micro_batches, bool split) {
  Schedule s = OneStagePerDevice(stages, micro_batches);
  const OpKind backward = split ? OpKind::kBackwardInput : OpKind::kBackward;
  for (int32_t st = 0; st < stages; ++st) {
    auto& program = s.programs[st];
    program.reserve((split ? 3 : 2) * static_cast<size_t>(micro_batches) + 1);
    const int32_t warmup = std::min(stages - st - 1, micro_batches);
    int32_t next_forward = 0, next_backward = 0, next_weight = 0;
    auto add_backward = [&](bool weight_now) {
      program.push_back(Compute(backward, st, next_backward++));
      if (split && weight_now) program.push_back(Compute(OpKind::kBackwardWeight, st, next_weight++));
    };
    for (; next_forward < warmup; ++next_forward) program.push_back(Compute(OpKind::kForward, st, next_forward));
    for (int32_t j = 0; next_forward < micro_batches; ++j) {
      program.push_back(Compute(OpKind::kForward, st, next_forward++));
      add_backward(j >= st);
    }
    while (next_backward < micro_batches) add_backward(true);
    while (split && next_weight < micro_batches) {
      program.push_back(Compute(OpKind::kBackwardWeight, st, next_weight++));
    }
  }
  Finish(s);
  return s;
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

Schedule Build1F1B(int32_t stages, int32_t micro_batches) { return OneForwardOneBackward(stages, micro_batches, false); }

namespace {

Result<void> CheckInterleaved(int32_t K, int32_t M, int32_t v) {
  if (v < 2) {
    return Fail(fmt::format("interleaved needs at least 2 chunks per device, got {} (with 1 it is 1f1b)", v));
  }
  if (M % K != 0) {
    return Fail(fmt::format("interleaved needs the micro-batches to be a multiple of the {} devices "
                            "(Megatron-LM's rule: they pass through the chunks in groups of K), got {}",
                            K, M));
  }
  return {};
}

}  // namespace

Result<Schedule> BuildInterleaved(int32_t devices, int32_t micro_batches, int32_t chunks) {
  const int32_t K = devices, M = micro_batches, v = chunks;
  if (auto ok = CheckInterleaved(K, M, v); !ok) return tl::unexpected(ok.error());
  Schedule s;
  s.num_stages = K * v;
  s.num_micro_batches = M;
  s.num_devices = K;
  s.placement.resize(s.num_stages);
  for (int32_t st = 0; st < s.num_stages; ++st) s.placement[st] = st % K;
  s.programs.resize(K);
  const int32_t total = M * v;
  // Virtual micro-batch k: its chunk and micro-batch (groups of K per chunk).
  auto micro_batch = [&](int32_t k) { return (k / (K * v)) * K + k % K; };
  auto chunk = [&](int32_t k, bool forward) {
    const int32_t c = (k % (K * v)) / K;
    return forward ? c : v - 1 - c;
  };
  for (int32_t d = 0; d < K; ++d) {
    auto& program = s.programs[d];
    program.reserve(2 * static_cast<size_t>(total) + 1);
    auto add = [&](OpKind kind, int32_t k) {
      const int32_t stage = chunk(k, kind == OpKind::kForward) * K + d;
      program.push_back(Op{.kind = kind, .device = d, .stage = stage, .micro_batch = micro_batch(k)});
    };
    const int32_t warmup = std::min((K - d - 1) * 2 + (v - 1) * K, total);
    int32_t next_forward = 0, next_backward = 0;
    for (; next_forward < warmup; ++next_forward) add(OpKind::kForward, next_forward);
    while (next_forward < total) {
      add(OpKind::kForward, next_forward++);
      add(OpKind::kBackward, next_backward++);
    }
    while (next_backward < total) add(OpKind::kBackward, next_backward++);
  }
  Finish(s);
  return s;
}

Schedule BuildZbH1(int32_t stages, int32_t micro_batches) { return OneForwardOneBackward(stages, micro_batches, true); }

Schedule BuildZbH2(int32_t stages, int32_t micro_batches) {
  Schedule s = OneStagePerDevice(stages, micro_batches);
  for (int32_t st = 0; st < stages; ++st) {
    auto& program = s.programs[st];
    program.reserve(3 * static_cast<size_t>(micro_batches) + 1);
    const int32_t warmup = std::min(2 * (stages - st) - 1, micro_batches), deferred = 2 * st;
    int32_t next_forward = 0, next_backward = 0, next_weight = 0;
    auto add_backward = [&] {
      program.push_back(Compute(OpKind::kBackwardInput, st, next_backward++));
      if (next_backward > deferred) program.push_back(Compute(OpKind::kBackwardWeight, st, next_weight++));
    };
    for (; next_forward < warmup; ++next_forward) program.push_back(Compute(OpKind::kForward, st, next_forward));
    while (next_forward < micro_batches) {
      add_backward();
      program.push_back(Compute(OpKind::kForward, st, next_forward++));
    }
    while (next_backward < micro_batches) add_backward();
    while (next_weight < micro_batches) program.push_back(Compute(OpKind::kBackwardWeight, st, next_weight++));
  }
  Finish(s);
  return s;
}

const std::vector<std::string>& BuilderNames() {
  static const std::vector<std::string> names = {"naive",  "gpipe", "1f1b", "interleaved",
                                                 "zb-h1", "zb-h2", "zb-v", "dualpipev"};
  return names;
}

const std::vector<std::string>& ScheduleNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = BuilderNames();
    all.emplace_back(kAutoSchedule);
    return all;
  }();
  return names;
}

Result<Schedule> BuildShape(std::string_view name, int32_t devices, int32_t micro_batches, int32_t chunks) {
  return BuildByName(name == kAutoSchedule ? "zb-h1" : name, devices, micro_batches, chunks);
}

int32_t DefaultChunks(std::string_view name) {
  return name == "interleaved" || name == "zb-v" || name == "dualpipev" ? 2 : 1;
}

Result<void> CheckShape(std::string_view name, int32_t devices, int32_t micro_batches, int32_t chunks) {
  if (name == kAutoSchedule) name = "zb-h1";  // BuildShape's
  if (devices < 1) return Fail(fmt::format("stages must be at least 1, got {}", devices));
  if (micro_batches < 1) {
    return Fail(fmt::format("micro-batches must be at least 1, got {}", micro_batches));
  }
  if (std::find(BuilderNames().begin(), BuilderNames().end(), name) == BuilderNames().end()) {
    return Fail(fmt::format("unknown schedule '{}': expected one of {}", name, fmt::join(BuilderNames(), ", ")));
  }
  const int32_t v = chunks == 0 ? DefaultChunks(name) : chunks;
  if (name == "interleaved") return CheckInterleaved(devices, micro_batches, v);
  if (v != DefaultChunks(name)) {
    return Fail(fmt::format("schedule '{}' places {} chunk{} per device, not {}", name, DefaultChunks(name),
                            DefaultChunks(name) == 1 ? "" : "s", v));
  }
  if (name == "dualpipev") return CheckDualPipeV(devices, micro_batches);
  return {};
}

std::vector<int32_t> ChunkChoices(std::string_view name) {
  if (name == "interleaved") return {2, 4, 8};
  return {DefaultChunks(name)};
}

Result<Schedule> BuildByName(std::string_view name, int32_t devices, int32_t micro_batches, int32_t chunks) {
  if (auto ok = CheckShape(name, devices, micro_batches, chunks); !ok) return tl::unexpected(ok.error());
  const int32_t v = chunks == 0 ? DefaultChunks(name) : chunks;
  if (name == "interleaved") return BuildInterleaved(devices, micro_batches, v);
  if (name == "naive") return BuildNaive(devices, micro_batches);
  if (name == "gpipe") return BuildGpipe(devices, micro_batches);
  if (name == "1f1b") return Build1F1B(devices, micro_batches);
  if (name == "zb-h1") return BuildZbH1(devices, micro_batches);
  if (name == "zb-h2") return BuildZbH2(devices, micro_batches);
  if (name == "dualpipev") return BuildDualPipeV(devices, micro_batches);
  return BuildZbV(devices, micro_batches);
}

}  // namespace twinpipe::ir
